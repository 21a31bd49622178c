//! PDFs (floor plans, brochures): page 1 rendered to PNG with poppler's
//! `pdftoppm`.

use std::path::Path;

use super::error::PosterError;
use super::input::local_arg;
use super::reason::non_empty;
use super::runner::{Limits, MAX_IMAGE_BYTES, Tool, run_tool};

/// The long edge, in pixels, a PDF page is rendered at (vector content, so
/// small pages lose nothing; large pages cannot blow up memory).
const PDF_LONG_EDGE: u32 = 2560;

/// Renders the first page of a PDF as PNG bytes with `pdftoppm`, scaled so
/// that its long edge is 2560 pixels.
pub async fn pdf_first_page(path: &Path) -> Result<Vec<u8>, PosterError> {
    let tool = Tool::pdftoppm();
    let mut command = tool.command();
    command
        .args(["-f", "1", "-l", "1", "-singlefile", "-png"])
        .arg("-scale-to")
        .arg(PDF_LONG_EDGE.to_string())
        .arg(local_arg(path));
    let png = run_tool(&tool, command, Limits::new(MAX_IMAGE_BYTES))
        .await?
        .into_success(path)?;
    non_empty(png, "the PDF has no page that could be rendered")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::fixtures::{ScratchDir, assert_unreadable, installed};
    use super::*;

    /// A one-page PDF (200×100 pt, a blue rectangle) with a correct xref.
    fn sample_pdf() -> Vec<u8> {
        let content = "0 0 1 rg 20 20 160 60 re f";
        let objects = [
            "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
            "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_owned(),
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 100] /Contents 4 0 R >>".to_owned(),
            format!(
                "<< /Length {} >>\nstream\n{content}\nendstream",
                content.len()
            ),
        ];
        let mut pdf = String::from("%PDF-1.4\n");
        let mut offsets = Vec::new();
        for (index, object) in objects.iter().enumerate() {
            offsets.push(pdf.len());
            let number = index + 1;
            pdf.push_str(&format!("{number} 0 obj\n{object}\nendobj\n"));
        }
        let xref_at = pdf.len();
        let count = objects.len() + 1;
        pdf.push_str(&format!("xref\n0 {count}\n0000000000 65535 f \n"));
        for offset in offsets {
            pdf.push_str(&format!("{offset:010} 00000 n \n"));
        }
        pdf.push_str(&format!(
            "trailer\n<< /Size {count} /Root 1 0 R >>\nstartxref\n{xref_at}\n%%EOF\n"
        ));
        pdf.into_bytes()
    }

    #[tokio::test]
    async fn pdf_first_page_renders_to_the_long_edge() {
        if !installed(&["pdftoppm"]) {
            return;
        }
        let dir = ScratchDir::new("pdf");
        let pdf = dir.file("sample.pdf");
        std::fs::write(&pdf, sample_pdf()).unwrap();
        let png = pdf_first_page(&pdf).await.unwrap();
        let page = image::load_from_memory(&png).unwrap();
        assert!(page.width() > 0);
        assert_eq!(
            (page.width(), page.height()),
            (PDF_LONG_EDGE, PDF_LONG_EDGE / 2)
        );
    }

    #[tokio::test]
    async fn garbage_pdf_is_unreadable() {
        if !installed(&["pdftoppm"]) {
            return;
        }
        let dir = ScratchDir::new("badpdf");
        let pdf = dir.file("garbage.pdf");
        std::fs::write(&pdf, b"%PDF-1.4\nthis is not really a PDF").unwrap();
        assert_unreadable(pdf_first_page(&pdf).await, &dir);
    }
}
