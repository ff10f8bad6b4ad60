// Node 18 or later: AWS Lambda@Edge (origin request: `handler`), Google Cloud Functions and
// Firebase Hosting (an HTTP function: `api`), or a plain Node server. Save it as handler.mjs.
// The tree is read from the environment variable ORIGIN: the HTTP(S) base url under which its
// files are, or its folder on this machine (`file:///PATH`, or a path such as `../out`); for an
// archive (FACTS.archive), the place of its root and parts/.
// Lambda@Edge, which has no environment variables, reads it from the origin CloudFront sends the
// request to (the bucket's domain and origin path). Run directly (`node handler.mjs`) it serves
// on HOST:PORT (default 127.0.0.1:8080), and refuses to start without a readable ORIGIN.
import { createReadStream, promises as fsp } from "node:fs";
import http from "node:http";
import { Readable } from "node:stream";
import { pathToFileURL } from "node:url";

/** Node's file calls, for a folder origin. */
const nodeFiles = {
  realPath: (path) => fsp.realpath(path),
  stat: async (path) => {
    const s = await fsp.stat(path);
    return { file: s.isFile(), dir: s.isDirectory(), size: s.size };
  },
  read: (path) => fsp.readFile(path),
  stream: (path) => Readable.toWeb(createReadStream(path)),
  // an archive's part: `length` bytes at `offset` (fewer when the file ends sooner)
  readAt: async (path, offset, length) => {
    const file = await fsp.open(path);
    try {
      const out = new Uint8Array(length);
      let got = 0;
      while (got < length) {
        const { bytesRead } = await file.read(out, got, length - got, offset + got);
        if (bytesRead === 0) break;
        got += bytesRead;
      }
      return out.subarray(0, got);
    } finally {
      await file.close();
    }
  },
  streamAt: (path, offset, length) =>
    length === 0 ? new Blob([]).stream() : Readable.toWeb(createReadStream(path, { start: offset, end: offset + length - 1 })),
};

let chosen = null;
const envOrigin = () => (chosen ??= originFor(FACTS, process.env.ORIGIN, nodeFiles));

/** An HTTP function (Google Cloud Functions, Firebase Hosting rewrites), and the plain server. */
export async function api(req, res) {
  const headers = new Headers();
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) headers.append(req.rawHeaders[i], req.rawHeaders[i + 1]);
  // a plain object, not a Request: any method gets its answer (405), even those Request refuses
  const request = { method: req.method, url: "http://localhost/", headers };
  let response = await handle(FACTS, request, envOrigin(), req.url);
  // a HEAD's document comes without its body: asked again as a GET, its Content-Length is the
  // GET's, as gen serve's is (a stored gzip member's and a bulk-data file's say theirs)
  const plain = !response.headers.has("content-length") && !response.headers.has("content-encoding");
  if (req.method === "HEAD" && response.status === 200 && plain) {
    response = await handle(FACTS, { ...request, method: "GET" }, envOrigin(), req.url);
  }
  const head = {};
  response.headers.forEach((value, name) => (head[name] = value));
  if (response.headers.has("content-encoding")) {
    // a bulk-data file: passed on a piece at a time, never held whole
    res.writeHead(response.status, head);
    if (response.body !== null) for await (const piece of response.body) res.write(piece);
    res.end();
    return;
  }
  const body = Buffer.from(await response.arrayBuffer());
  if (response.status !== 204 && response.status !== 304) head["content-length"] = String(body.length);
  res.writeHead(response.status, head);
  res.end(req.method === "HEAD" ? undefined : body);
}

/** A JSON 500 for an error outside the handler's own answers (no ORIGIN set). */
function failed(res, e) {
  const body = JSON.stringify({ detail: `this handler cannot answer: ${e && e.message ? e.message : e}` });
  if (!res.headersSent) {
    res.writeHead(500, { "content-type": "application/json; charset=utf-8", "cache-control": "no-store", "access-control-allow-origin": "*" });
  }
  res.end(body);
}

/** The base url of the origin CloudFront sends an origin request to (S3 or custom). */
function originOf(origin) {
  const { custom, s3 } = origin ?? {};
  if (!custom && !s3) throw new Error("the event names no origin: set ORIGIN, or attach the function on origin request");
  const at = custom ?? s3;
  const protocol = custom?.protocol ?? "https";
  const usual = { http: 80, https: 443 }[protocol];
  const port = custom?.port && custom.port !== usual ? `:${custom.port}` : "";
  return `${protocol}://${at.domainName}${port}${at.path ?? ""}`;
}

/** AWS Lambda@Edge, origin request. */
export async function handler(event) {
  const cf = event.Records[0].cf.request;
  const headers = new Headers();
  for (const list of Object.values(cf.headers ?? {})) for (const { key, value } of list) headers.append(key, value);
  const target = cf.uri + (cf.querystring ? `?${cf.querystring}` : "");
  const origin = process.env.ORIGIN ? envOrigin() : httpOriginFor(FACTS, originOf(cf.origin));
  const response = await handle(FACTS, { method: cf.method, url: "http://localhost/", headers }, origin, target);
  const out = { status: String(response.status), headers: {} };
  response.headers.forEach((value, name) => (out.headers[name] = [{ key: name, value }]));
  const body = Buffer.from(await response.arrayBuffer());
  if (body.length > 0 && cf.method !== "HEAD") {
    out.body = body.toString("base64");
    out.bodyEncoding = "base64";
  }
  return out;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  try {
    await envOrigin().ready?.();
  } catch (e) {
    console.error(`this handler cannot start: ${e && e.message ? e.message : e}`);
    process.exit(1);
  }
  const host = process.env.HOST ?? "127.0.0.1";
  const port = Number(process.env.PORT ?? "8080");
  http
    .createServer((req, res) => api(req, res).catch((e) => failed(res, e)))
    .listen(port, host, () => console.log(`listening on http://${host}:${port}/api/v2/`));
}
