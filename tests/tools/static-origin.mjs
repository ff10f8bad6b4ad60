// A bare static store for tests/suite/edge.rs: serves the files under a folder at their paths, a
// folder's index.json at the folder's path, 404 for anything else, query strings ignored, as an
// object store's public endpoint does. `node static-origin.mjs <folder> <port> [<reads log>]`:
// with a log file, the path of every request is appended to it, one a line (the reads a handler
// made, for the bounded-work test).
import http from "node:http";
import { appendFileSync } from "node:fs";
import { readFile, stat } from "node:fs/promises";
import { join, normalize } from "node:path";

const [root, port, reads] = process.argv.slice(2);
http
  .createServer(async (req, res) => {
    if (reads) appendFileSync(reads, `${req.url}\n`);
    const path = normalize(decodeURIComponent(req.url.split("?")[0]));
    let file = join(root, path);
    try {
      if ((await stat(file)).isDirectory()) file = join(file, "index.json");
      const body = await readFile(file);
      res.writeHead(200, { "content-type": "application/json", "content-length": body.length });
      res.end(body);
    } catch {
      res.writeHead(404, { "content-type": "text/plain" });
      res.end("not found");
    }
  })
  .listen(Number(port), "127.0.0.1", () => console.log("ready"));
