//! Receiver-side verification of webhook deliveries.
