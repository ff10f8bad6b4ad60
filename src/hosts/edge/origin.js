// The edge handler's origins (src/hosts/edge/handler.js reads the tree through them): an HTTP(S)
// base url, an R2 bucket or a folder on this machine (Deno, Node), each read bounded in bytes
// (the first two in time too), and `treeOrigin`, which asks for no key the tree cannot hold and
// refuses what no file of the tree can be. Printed after the handler, in the same module
// (src/hosts/edge.rs).

/** An origin read that has not ended after this long is given up: a 502 (docs/deploy.md). */
const ORIGIN_TIMEOUT_MS = 10000;

/** An origin read that is not the tree's file: `status` 502 (the origin failed) or 503 (it holds
 * a file that does not match the tree, as gen serve answers a file that fails its manifest). */
class OriginFault extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** An origin reading the tree's files under an HTTP(S) base url (`<base>/api/v2/index.json`). */
export function httpOrigin(base) {
  const root = String(base).replace(/\/+$/, "");
  return {
    /** The bytes of the file at `path`, `null` when the origin holds none; at most `maxBytes`. */
    async get(path, maxBytes = Infinity) {
      try {
        const reply = await fetch(`${root}/${path}`, { signal: AbortSignal.timeout(ORIGIN_TIMEOUT_MS) });
        // a bucket without list permission answers 403 for a key it does not hold
        if (reply.status === 404 || reply.status === 403) {
          reply.body?.cancel().catch(() => {});
          return null;
        }
        if (!reply.ok) {
          reply.body?.cancel().catch(() => {});
          throw new OriginFault(502, `the origin answered ${reply.status} for ${path}`);
        }
        const type = reply.headers.get("Content-Type");
        if (!isJsonType(type)) {
          reply.body?.cancel().catch(() => {});
          throw new OriginFault(502, `the origin answered ${path} with ${type}, not JSON`);
        }
        const declared = reply.headers.get("Content-Length");
        if (declared !== null && Number(declared) > maxBytes) {
          reply.body?.cancel().catch(() => {});
          throw tooLarge(path, maxBytes);
        }
        return await readBounded(reply.body, path, maxBytes);
      } catch (e) {
        if (e && (e.name === "TimeoutError" || e.name === "AbortError")) {
          throw new OriginFault(502, `the origin did not answer ${path} within ${ORIGIN_TIMEOUT_MS / 1000} s`);
        }
        throw e;
      }
    },
    /**
     * The file at `path` as a stream, `{body, size, etag}`, `null` when the origin holds none
     * (a bulk-data file: gzip bytes). An origin that sends it with `Content-Encoding: gzip` (as
     * `gen publish` stores it) has it decoded by the runtime's fetch: it is compressed again
     * here, the same lines but not the same bytes (docs/deploy.md).
     */
    async stream(path) {
      const reply = await fetch(`${root}/${path}`, { signal: AbortSignal.timeout(ORIGIN_TIMEOUT_MS) });
      if (reply.status === 404 || reply.status === 403) {
        reply.body?.cancel().catch(() => {});
        return null;
      }
      if (!reply.ok || reply.body === null) {
        reply.body?.cancel().catch(() => {});
        throw new OriginFault(502, `the origin answered ${reply.status} for ${path}`);
      }
      const decoded = (reply.headers.get("Content-Encoding") ?? "").toLowerCase().includes("gzip");
      if (decoded) return { body: reply.body.pipeThrough(new CompressionStream("gzip")), size: null, etag: bulkEtag(path) };
      const size = reply.headers.get("Content-Length");
      return { body: reply.body, size: size === null ? null : Number(size), etag: bulkEtag(path) };
    },
  };
}

/**
 * The origin an `ORIGIN` setting names: an HTTP(S) base url, or the tree's folder on this
 * machine, as a `file://` url or a path (absolute, or from the working directory when it starts
 * with `./` or `../`), read through `files`, the runtime's file calls (`folderOrigin`). Anything
 * else is refused, saying what ORIGIN takes. `http` and `folder` make the origin of each kind
 * (for an archive: ranges.js, `originFor`).
 */
function originFrom(base, files, http = httpOrigin, folder = folderOrigin) {
  const text = String(base ?? "");
  const takes = "the http(s):// base url under which the tree's files are, or the tree's folder as a file:///PATH url or a path starting with /, ./ or ../";
  if (text === "") throw new Error(`set the environment variable ORIGIN to ${takes}`);
  if (/^https?:\/\//i.test(text)) return http(text);
  if (/^file:/i.test(text)) {
    const url = new URL(text);
    if (url.host !== "" && url.host !== "localhost") throw new Error(`ORIGIN ${text} names a folder on the host ${url.host}: give a folder of this machine, file:///PATH`);
    return folder(decodeURIComponent(url.pathname), files);
  }
  if (/^(\/|\.\.?(\/|$))/.test(text)) return folder(text, files);
  throw new Error(`ORIGIN is ${JSON.stringify(text)}: give ${takes}`);
}

/**
 * An origin reading the tree's files from `folder` on this machine through `files` (`realPath`,
 * `stat` → `{file, dir, size}`, `read`, `stream`). Only the folder's own regular files are read:
 * a path that leads out of it (through a link) or to anything but a file (a FIFO, a device) is
 * a 503, as a file that does not match the tree; a missing one is `null`. `ready()` resolves
 * the folder once, refusing one that is not there (the servers call it before they listen).
 */
function folderOrigin(folder, files) {
  const base = folder.replace(/(.)\/+$/, "$1");
  let top = null;
  const ready = () =>
    (top ??= (async () => {
      const real = await files.realPath(base).catch((e) => {
        throw new Error(`ORIGIN names the folder ${base}, which cannot be read (${e?.message ?? e})`);
      });
      if (!(await files.stat(real)).dir) throw new Error(`ORIGIN names ${base}, which is not a folder`);
      return real.endsWith("/") ? real : `${real}/`;
    })());
  const missing = (e) => ["NotFound", "NotADirectory"].includes(e?.name) || ["ENOENT", "ENOTDIR"].includes(e?.code);
  /** `{at, size}` of the file at `path` (read at `at`, the path under the folder as given), or `null`. */
  const locate = async (path) => {
    const root = await ready();
    const at = `${base}/${path}`;
    let real;
    try {
      real = await files.realPath(at);
    } catch (e) {
      if (missing(e)) return null;
      throw e;
    }
    if (!real.startsWith(root)) throw new OriginFault(503, `${path} leads out of the tree's folder`);
    const kind = await files.stat(at);
    if (kind.dir) return null;
    if (!kind.file) throw new OriginFault(503, `${path} is not a file`);
    return { at, size: kind.size };
  };
  return {
    ready,
    async get(path, maxBytes = Infinity) {
      const found = await locate(path);
      if (found === null) return null;
      if (found.size > maxBytes) throw tooLarge(path, maxBytes);
      const body = await files.read(found.at);
      if (body.byteLength > maxBytes) throw tooLarge(path, maxBytes);
      return body;
    },
    /** The file at `path` as a stream, `{body, size, etag}`, `null` when the folder holds none. */
    async stream(path) {
      const found = await locate(path);
      return found === null ? null : { body: await files.stream(found.at), size: found.size, etag: bulkEtag(path) };
    },
  };
}

/** A bulk-data file's ETag, from the hash its name carries (`<segment>-<hash>.ndjson.gz`). */
function bulkEtag(path) {
  return `"${path.slice(path.lastIndexOf("-") + 1, -".ndjson.gz".length)}"`;
}

/** An origin reading the tree's files from an R2 bucket binding whose keys are their paths. */
export function r2Origin(bucket) {
  return {
    async get(path, maxBytes = Infinity) {
      const object = await bucket.get(path);
      if (object === null) return null;
      if (object.size > maxBytes) {
        object.body.cancel().catch(() => {});
        throw tooLarge(path, maxBytes);
      }
      return new Uint8Array(await object.arrayBuffer());
    },
    /** The file at `path` as a stream, `{body, size, etag}`, `null` when the bucket holds none. */
    async stream(path) {
      const object = await bucket.get(path);
      return object === null ? null : { body: object.body, size: object.size, etag: bulkEtag(path) };
    },
  };
}

/** True for a Content-Type a JSON file may be stored with: JSON, a bare byte stream, or none. */
function isJsonType(type) {
  if (type === null) return true;
  const media = type.split(";")[0].trim().toLowerCase();
  return ["application/json", "application/octet-stream", "binary/octet-stream"].includes(media) || media.endsWith("+json");
}

function tooLarge(path, maxBytes) {
  return new OriginFault(502, `the origin answered ${path} with more than ${maxBytes} bytes, more than any file of the tree`);
}

/** The bytes of `body` (a stream), cancelled and refused past `maxBytes`. */
async function readBounded(body, path, maxBytes) {
  if (body === null) return new Uint8Array(0);
  const reader = body.getReader();
  const chunks = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      reader.cancel().catch(() => {});
      throw tooLarge(path, maxBytes);
    }
    chunks.push(value);
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.byteLength;
  }
  return out;
}

/**
 * `origin` as the handler reads it: a key longer than any the tree holds is never asked for (it
 * names no file of the tree; a store would refuse it), a read takes at most the tree's
 * `max_read_bytes`, and what is read must be a JSON object or array, as every file of the tree is.
 */
function treeOrigin(facts, origin) {
  return {
    async get(path) {
      const found = await this.getStored(path);
      return found === null ? null : found.bytes;
    },
    /** `{bytes, gzip}`: the document and, from an archive, its stored gzip member (else `null`). */
    async getStored(path) {
      if (new TextEncoder().encode(path).length > facts.longest_key) return null;
      const found = origin.getStored ? await origin.getStored(path, facts.max_read_bytes) : await origin.get(path, facts.max_read_bytes);
      if (found === null) return null;
      const body = origin.getStored ? found.bytes : found;
      let i = 0;
      while (i < body.length && (body[i] === 32 || body[i] === 10 || body[i] === 13 || body[i] === 9)) i++;
      if (body[i] !== 123 && body[i] !== 91) throw new OriginFault(503, `${path} is not a JSON document`);
      return { bytes: body, gzip: origin.getStored ? found.gzip : null };
    },
    /** A bulk-data file, streamed: never longer than a key the tree holds. */
    async stream(path) {
      if (new TextEncoder().encode(path).length > facts.longest_key) return null;
      return origin.stream(path);
    },
  };
}
