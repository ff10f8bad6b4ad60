// A misbehaving static store for tests/suite/edge.rs: serves the files under a folder as
// static-origin.mjs does, except the paths named in a faults file (JSON, read again on every
// request, so a test changes the faults between requests), which it answers as told:
//   {"<path>": {"html": true}}              200, text/html, an error page
//   {"<path>": {"body": "<text>"}}           200, application/json, that text
//   {"<path>": {"from": "<other path>"}}     200, application/json, another file's bytes
//   {"<path>": {"endless": <bytes>}}         200, application/json, that many bytes made on the
//                                            fly (no Content-Length), as fast as they are read
//   {"<path>": {"hang": true}}               nothing, ever (the connection stays open)
// `node fault-origin.mjs <folder> <port> <faults file>`
import http from "node:http";
import { readFileSync } from "node:fs";
import { readFile, stat } from "node:fs/promises";
import { join, normalize } from "node:path";

const [root, port, faultsFile] = process.argv.slice(2);

const faults = () => {
  try {
    return JSON.parse(readFileSync(faultsFile, "utf8"));
  } catch {
    return {};
  }
};

async function file(path) {
  let at = join(root, normalize(decodeURIComponent(path)));
  if ((await stat(at)).isDirectory()) at = join(at, "index.json");
  return readFile(at);
}

/** Writes `size` bytes of a JSON-looking body, a chunk at a time, as fast as they are read. */
function endless(res, size) {
  const chunk = Buffer.alloc(1 << 20, "x");
  chunk[0] = 123; // "{"
  let left = size;
  const more = () => {
    while (left > 0) {
      const n = Math.min(left, chunk.length);
      left -= n;
      if (!res.write(n === chunk.length ? chunk : chunk.subarray(0, n))) return res.once("drain", more);
    }
    res.end();
  };
  res.on("close", () => (left = 0));
  more();
}

http
  .createServer(async (req, res) => {
    const path = req.url.split("?")[0];
    const fault = faults()[path.replace(/^\//, "")];
    try {
      if (fault?.hang) return;
      if (fault?.html) {
        res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
        return res.end("<!doctype html><title>Service unavailable</title><p>try again later</p>");
      }
      if (fault?.endless) {
        res.writeHead(200, { "content-type": "application/json" });
        return endless(res, fault.endless);
      }
      const body = fault?.body !== undefined ? Buffer.from(fault.body) : await file(fault?.from ? `/${fault.from}` : path);
      res.writeHead(200, { "content-type": "application/json", "content-length": body.length });
      res.end(body);
    } catch {
      res.writeHead(404, { "content-type": "text/plain" });
      res.end("not found");
    }
  })
  .listen(Number(port), "127.0.0.1", () => console.log("ready"));
