// A bare static store for tests/suite/edge.rs: serves the files under a folder at their paths, a
// folder's index.json at the folder's path, 404 for anything else, query strings ignored, as an
// object store's public endpoint does. `node static-origin.mjs <folder> <port> [<reads log>]`:
// with a log file, the path of every request is appended to it, one a line (the reads a handler
// made, for the bounded-work test; a Range request's line ends with its range). A `Range:
// bytes=A-B` request (an archive's parts, read by the handler in archive mode) gets a 206 with
// those bytes and Content-Range, or a 416 past the end, as a bucket answers it.
import http from "node:http";
import { appendFileSync } from "node:fs";
import { readFile, stat } from "node:fs/promises";
import { join, normalize } from "node:path";

const [root, port, reads] = process.argv.slice(2);
http
  .createServer(async (req, res) => {
    const range = /^bytes=([0-9]+)-([0-9]+)$/.exec(req.headers.range ?? "");
    if (reads) appendFileSync(reads, range ? `${req.url} ${range[1]}-${range[2]}\n` : `${req.url}\n`);
    const path = normalize(decodeURIComponent(req.url.split("?")[0]));
    let file = join(root, path);
    try {
      if ((await stat(file)).isDirectory()) file = join(file, "index.json");
      const body = await readFile(file);
      if (range) {
        const [start, end] = [Number(range[1]), Math.min(Number(range[2]), body.length - 1)];
        if (start >= body.length || start > end) {
          res.writeHead(416, { "content-range": `bytes */${body.length}` });
          return res.end();
        }
        const part = body.subarray(start, end + 1);
        const headers = { "content-type": "application/octet-stream", "content-length": part.length };
        res.writeHead(206, { ...headers, "content-range": `bytes ${start}-${end}/${body.length}` });
        return res.end(part);
      }
      res.writeHead(200, { "content-type": "application/json", "content-length": body.length });
      res.end(body);
    } catch {
      res.writeHead(404, { "content-type": "text/plain" });
      res.end("not found");
    }
  })
  .listen(Number(port), "127.0.0.1", () => console.log("ready"));
