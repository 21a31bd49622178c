// tus's reference Node server (@tus/server with @tus/file-store), as its
// README sets it up: `node tus_server.mjs PORT DIRECTORY`. Prints one JSON
// line when it listens; stops when its stdin closes.
import http from "node:http";
import { Server } from "@tus/server";
import { FileStore } from "@tus/file-store";

const [port, directory] = process.argv.slice(2);
const tus = new Server({ path: "/files", datastore: new FileStore({ directory }) });
const server = http.createServer((request, response) => tus.handle(request, response));
server.listen(Number(port), "127.0.0.1", () => {
  console.log(JSON.stringify({ url: `http://127.0.0.1:${port}/files`, pid: process.pid }));
});
process.stdin.resume();
process.stdin.on("end", () => process.exit(0));
