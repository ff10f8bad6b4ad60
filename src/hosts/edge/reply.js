// The edge handler's replies (src/serve/respond.rs, src/answers.rs): the error bodies filled
// from their templates, the headers, the 304s and the bulk-data stream. Printed after paging.js,
// in the same module (src/hosts/edge.rs).

// Rust counterparts (see handler.js):
//   badParam          src/answers.rs       bad_param
//   namesOutOfStep    src/answers.rs       tree_changed
//   notFound          src/serve/respond.rs not_found
//   debugEscape       src/hosts/edge.rs    debug_escaped
//   preflight         src/serve/respond.rs echoable
//   documentReply     src/serve/respond.rs etag_matches
//   acceptsGzip       src/serve/respond.rs accepts_gzip

const ALLOW = "GET, HEAD, OPTIONS";
const ALLOW_METHODS = "GET, HEAD";
const PREFLIGHT_MAX_AGE = "86400";
const PREFLIGHT_VARY = "Access-Control-Request-Headers";
const MAX_SHOWN_PATH = 200;
const JSON_TYPE = "application/json; charset=utf-8";
const BULK_CACHE_CONTROL = "public, max-age=31536000, immutable";
const IGNORED_HEADER = "Gen-Ignored";
/** A body shorter than this is sent plain, as gen serve sends it (src/serve/item.rs MIN_GZIP). */
const MIN_GZIP = 200;

function badParam(facts, { name, value }) {
  const which = name === "limit" ? (value.startsWith("-") ? "limit_negative" : "limit") : "offset";
  return fill(facts, facts.errors[`bad_${which}`], { Value: value });
}

/**
 * The 503 of a names document that is not its list's, as gen serve words it for the file
 * (src/answers.rs `tree_changed`): nothing is cached, and a retry finds them in step.
 */
function namesOutOfStep(segment) {
  const path = `api/v2/${segment}/_names/index.json`;
  const detail =
    `the tree on disk changed: "${path}" does not match the manifest this server read (a build may be ` +
    "replacing the tree, or the file was edited); retry in a moment, and if this goes on, repair the tree with `gen build --verify`";
  return JSON.stringify({ detail });
}

/** The 404 body for `target`, worded as gen serve words it. */
function notFound(facts, target) {
  const path = target.split("?")[0];
  const key = normalize(path);
  const parts = key === null ? [] : key.split("/").slice(2);
  const segment = parts[0];
  const isList = segment !== undefined && Object.hasOwn(facts.resources, segment);
  if (segment !== undefined && !isList && !facts.singletons.includes(segment)) {
    return fill(facts, facts.errors.no_resource, { Segment: segment });
  }
  if (parts.length === 2 && isList) return fill(facts, facts.errors.no_record, { Segment: segment, Record: parts[1] });
  return fill(facts, facts.errors.not_a_document, { Path: Array.from(path).slice(0, MAX_SHOWN_PATH).join("") });
}

/**
 * Fills a body template (`[text, hole, text, ...]`: JSON text at even places, hole names at odd
 * ones) with `values`. A hole right after an escaped quote is quoted as Rust's `{:?}` quotes a
 * string; every hole is then escaped as a JSON string's content.
 */
function fill(facts, template, values) {
  let out = "";
  template.forEach((part, i) => {
    if (i % 2 === 0) {
      out += part;
    } else {
      const value = String(values[part] ?? "");
      const quoted = template[i - 1].endsWith('\\"') ? debugEscape(facts, value) : value;
      out += JSON.stringify(quoted).slice(1, -1);
    }
  });
  return out;
}

/** The inside of Rust's `{:?}` quoting of a string (`str::escape_debug`). */
function debugEscape(facts, text) {
  let out = "";
  for (const ch of text) {
    const c = ch.codePointAt(0);
    if (ch === '"' || ch === "\\") out += `\\${ch}`;
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else if (c === 0) out += "\\0";
    else if (c < 0x20 || c === 0x7f || (c >= 0x80 && isDebugEscaped(facts, c))) out += `\\u{${c.toString(16)}}`;
    else out += ch;
  }
  return out;
}

const escapeRuns = new WeakMap();

/** True when Rust's `{:?}` writes code point `c` (past ASCII) as `\u{..}`: the runs of
 * `facts.debug_escaped` (src/hosts/edge.rs, from the Rust that built gen), searched by halves. */
function isDebugEscaped(facts, c) {
  let runs = escapeRuns.get(facts);
  if (runs === undefined) {
    runs = [];
    let end = 0x80;
    for (let i = 0; i + 1 < facts.debug_escaped.length; i += 2) {
      const start = end + facts.debug_escaped[i];
      end = start + facts.debug_escaped[i + 1];
      runs.push([start, end]);
    }
    escapeRuns.set(facts, runs);
  }
  let low = 0;
  let high = runs.length;
  while (low < high) {
    const middle = (low + high) >> 1;
    if (runs[middle][1] <= c) low = middle + 1;
    else high = middle;
  }
  return low < runs.length && runs[low][0] <= c;
}

/** Headers every answer carries: CORS, and the tree's extra headers (with the expose line). */
function commonHeaders(facts) {
  const headers = new Headers({ "Access-Control-Allow-Origin": "*" });
  for (const [name, value] of facts.extra_headers) headers.set(name, value);
  if (facts.extra_headers.length > 0) {
    headers.set("Access-Control-Expose-Headers", facts.extra_headers.map(([name]) => name).join(", "));
  }
  return headers;
}

function errorReply(facts, status, body, allow = false) {
  const headers = commonHeaders(facts);
  headers.set("Content-Type", JSON_TYPE);
  headers.set("Cache-Control", "no-store");
  if (allow) headers.set("Allow", ALLOW);
  return new Response(body, { status, headers });
}

function preflight(facts, requested) {
  const headers = commonHeaders(facts);
  headers.set("Allow", ALLOW);
  headers.set("Access-Control-Allow-Methods", ALLOW_METHODS);
  const asked = (requested ?? "").trim();
  if (asked !== "" && asked.length <= 1024 && /^[A-Za-z0-9\-_, \t]+$/.test(asked)) {
    headers.set("Access-Control-Allow-Headers", asked);
  }
  headers.set("Access-Control-Max-Age", PREFLIGHT_MAX_AGE);
  headers.set("Vary", PREFLIGHT_VARY);
  return new Response(null, { status: 204, headers });
}

/** True for a bulk-data file's key: `api/v2/bulk-data/<segment>-<hash>.ndjson.gz`. */
function isBulkFile(key) {
  return /^api\/v2\/bulk-data\/[a-z0-9-]+\.ndjson\.gz$/.test(key);
}

/**
 * A bulk-data file, `{body, etag}` from the origin: its bytes as they are (gzip already: sent
 * with `Content-Encoding: gzip` whatever the client accepts, and never compressed again: hence
 * `encodeBody: "manual"` for workerd), cached forever (its name changes with its bytes).
 */
function bulkReply(facts, request, file) {
  const headers = commonHeaders(facts);
  headers.set("ETag", file.etag);
  headers.set("Cache-Control", BULK_CACHE_CONTROL);
  const tags = request.headers.get("If-None-Match");
  const current = tags !== null && tags.split(",").some((t) => { const tag = t.trim().replace(/^W\//, ""); return tag === "*" || tag === file.etag; });
  if (current || request.method === "HEAD") file.body.cancel().catch(() => {});
  if (current) return new Response(null, { status: 304, headers });
  headers.set("Content-Type", "application/x-ndjson");
  headers.set("Content-Encoding", "gzip");
  if (file.size !== null) headers.set("Content-Length", String(file.size));
  return new Response(request.method === "HEAD" ? null : file.body, { status: 200, headers, encodeBody: "manual" });
}

/** True when `Accept-Encoding` allows gzip (`gzip` or `*` with a non-zero quality). */
function acceptsGzip(header) {
  if (header === null) return false;
  let gzip = null;
  let any = null;
  for (const item of header.split(",")) {
    const [coding, ...params] = item.split(";");
    let qualityOk = true;
    for (const param of params) {
      const p = param.trim();
      if (p.startsWith("q=") || p.startsWith("Q=")) {
        const q = p.slice(2).trim();
        qualityOk = /^[0-9.]+$/.test(q) && Number(q) > 0;
      }
    }
    const name = coding.trim().toLowerCase();
    if (name === "gzip" || name === "x-gzip") gzip = qualityOk;
    else if (name === "*") any = qualityOk;
  }
  return gzip ?? any ?? false;
}

/**
 * A document's answer (`bytes`), with its ETag and 304. `gzip`: its stored gzip member (from an
 * archive, checked), sent as it is to a client that takes gzip when gen serve would send gzip (a
 * body of MIN_GZIP bytes or more that it makes smaller), with `Content-Encoding: gzip`, its own
 * ETag (`-gz`) and `Vary: Accept-Encoding`, as gen serve sends it; `encodeBody: "manual"` keeps
 * workerd from compressing it again.
 */
async function documentReply(facts, request, bytes, revalidate, link = null, ignored = null, gzip = null) {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  const etag = `"${Array.from(digest.slice(0, 16), (b) => b.toString(16).padStart(2, "0")).join("")}"`;
  const gzipped = gzip !== null && bytes.length >= MIN_GZIP && gzip.length < bytes.length ? gzip : null;
  const etagGzip = `${etag.slice(0, -1)}-gz"`;
  // a Worker sees Accept-Encoding rewritten ("br, gzip" whatever the client sent): the client's
  // own is request.cf.clientAcceptEncoding ("" when it sent none)
  const clientAccepts = request.cf?.clientAcceptEncoding;
  const accepts = typeof clientAccepts === "string" ? clientAccepts : request.headers.get("Accept-Encoding");
  const sendGzip = gzipped !== null && acceptsGzip(accepts);
  const headers = commonHeaders(facts);
  if (ignored !== null) {
    headers.set(IGNORED_HEADER, ignored);
    const exposed = headers.get("Access-Control-Expose-Headers");
    headers.set("Access-Control-Expose-Headers", exposed === null ? IGNORED_HEADER : `${exposed}, ${IGNORED_HEADER}`);
  }
  headers.set("ETag", sendGzip ? etagGzip : etag);
  headers.set("Cache-Control", revalidate ? "no-cache" : facts.cache_control);
  if (link) headers.set("Link", link);
  // two representations: a cache keeps them apart
  if (gzipped !== null) headers.set("Vary", "Accept-Encoding");
  const tags = request.headers.get("If-None-Match");
  const named = (tag) => tag === "*" || tag === etag || (gzipped !== null && tag === etagGzip);
  if (tags !== null && tags.split(",").some((t) => named(t.trim().replace(/^W\//, "")))) {
    return new Response(null, { status: 304, headers });
  }
  headers.set("Content-Type", JSON_TYPE);
  if (!sendGzip) return new Response(request.method === "HEAD" ? null : bytes, { status: 200, headers });
  headers.set("Content-Encoding", "gzip");
  headers.set("Content-Length", String(gzipped.length));
  return new Response(request.method === "HEAD" ? null : gzipped, { status: 200, headers, encodeBody: "manual" });
}
