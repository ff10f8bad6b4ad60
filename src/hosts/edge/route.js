// The edge handler's router (src/serve/route.rs): where a request target goes, and its whole
// query read once. Printed after handler.js, in the same module (src/hosts/edge.rs).

// Rust counterparts (see handler.js):
//   stripOrigin       src/serve/route.rs   strip_origin
//   route             src/serve/route.rs   route
//   normalize         src/serve/route.rs   normalize
//   percentDecode     src/serve/route.rs   percent_decode
//   decodeLossy       src/serve/route.rs   decode_lossy
//   listQuery         src/serve/route.rs   list_query
//   number            src/serve/route.rs   number

/** Drops `http://host:port` from an absolute-form target, as gen serve does (src/serve/route.rs). */
function stripOrigin(target) {
  const lower = target.slice(0, 8).toLowerCase();
  const scheme = lower.startsWith("http://") ? 7 : lower.startsWith("https://") ? 8 : 0;
  if (scheme === 0) return target;
  const rest = target.slice(scheme);
  const at = rest.search(/[/?]/);
  return at >= 0 && rest[at] === "/" ? rest.slice(at) : "/";
}

/**
 * Where a request target goes and its whole query, read once (src/serve/route.rs `route`):
 * `{route: {kind: "list", segment} | {kind: "doc", key} | {kind: "none"}, query}`.
 */
function route(facts, target) {
  const question = target.indexOf("?");
  const path = question < 0 ? target : target.slice(0, question);
  const query = listQuery(facts, question < 0 ? "" : target.slice(question + 1));
  const key = normalize(stripOrigin(path));
  if (key === null) return { route: { kind: "none" }, query };
  // segments of lists are `[a-z0-9-]`: a dotted third part is a file such as openapi.json
  if (key.split("/").length === 3 && !key.includes(".")) return { route: { kind: "list", segment: key.split("/")[2] }, query };
  return { route: { kind: "doc", key }, query };
}

/**
 * The index key of a request path (`api/v2/berry/1`), or `null` when it cannot name a document:
 * each segment percent-decoded, made of `[A-Za-z0-9._-]` and not all dots, then lower-cased.
 */
function normalize(path) {
  if (!path.startsWith("/")) return null;
  let rest = path.slice(1);
  if (rest.endsWith("/")) rest = rest.slice(0, -1);
  const segments = [];
  for (const part of rest.split("/")) {
    const bytes = percentDecode(part);
    if (bytes === null) return null;
    const allowed = bytes.every((b) => isAlphanumeric(b) || b === 45 || b === 95 || b === 46);
    if (!allowed || bytes.every((b) => b === 46)) return null;
    segments.push(String.fromCharCode(...bytes).toLowerCase());
  }
  const key = segments.join("/");
  return key === "api/v2" || key.startsWith("api/v2/") ? key : null;
}

function isAlphanumeric(b) {
  return (b >= 48 && b <= 57) || (b >= 65 && b <= 90) || (b >= 97 && b <= 122);
}

/** Decodes `%XX` escapes into bytes (the rest as its UTF-8 bytes); `null` for a malformed one. */
function percentDecode(text) {
  const bytes = Array.from(new TextEncoder().encode(text));
  const out = [];
  for (let i = 0; i < bytes.length; ) {
    if (bytes[i] === 37) {
      if (i + 3 > bytes.length) return null;
      const value = hexByte(bytes[i + 1], bytes[i + 2]);
      if (value === null) return null;
      out.push(value);
      i += 3;
    } else {
      out.push(bytes[i]);
      i += 1;
    }
  }
  return out;
}

/** Two bytes read as two hex digits, `null` when they are not (`%+7` is no escape). */
function hexByte(a, b) {
  const digit = (c) => (c >= 48 && c <= 57 ? c - 48 : c >= 65 && c <= 70 ? c - 55 : c >= 97 && c <= 102 ? c - 87 : -1);
  return digit(a) < 0 || digit(b) < 0 ? null : digit(a) * 16 + digit(b);
}

/** Percent-decodes a query key or value for comparison and display (malformed escapes kept). */
function decodeLossy(text) {
  const bytes = percentDecode(text);
  // a leading U+FEFF is a character of the value, as gen serve reads it, not a byte order mark
  return bytes === null ? text : new TextDecoder("utf-8", { ignoreBOM: true }).decode(new Uint8Array(bytes));
}

/**
 * A list's whole query, in one pass over its parameters (src/serve/route.rs `list_query`):
 * `page`, `{offset, limit}` as BigInts or `{bad: {name, value}}` (the last `limit` and `offset`
 * count); `q`, the last one percent-decoded with `+` as a space, `null` when absent or empty;
 * `conditions`, every other parameter but `format` as `[name, value]` in the order given, decoded
 * as `q` is, an empty value left out; `params`, the names of those parameters whatever their
 * value, each once, but a nameless one and `format=json` in any case. (`format` and the
 * parameters the HTML view shows are gen serve's alone.)
 */
function listQuery(facts, query) {
  let limit;
  let offset;
  let q = null;
  const conditions = [];
  const params = [];
  const seen = new Set();
  for (const pair of query.split("&")) {
    if (pair === "") continue;
    const equals = pair.indexOf("=");
    const name = decodeLossy(equals < 0 ? pair : pair.slice(0, equals));
    const value = equals < 0 ? "" : pair.slice(equals + 1);
    const text = decodeLossy(value.replaceAll("+", " "));
    if (name === "limit") limit = value;
    else if (name === "offset") offset = value;
    else if (name === "q") q = text;
    else if (name !== "format") {
      // `FORMAT=JSON` is `format=json`, taken; a parameter without a name is not named
      if (name !== "" && pair.toLowerCase() !== "format=json" && !seen.has(name)) {
        seen.add(name);
        params.push(name);
      }
      if (text !== "") conditions.push([name, text]);
    }
  }
  return { page: pageOf(facts, limit, offset), q: q === "" ? null : q, conditions, params };
}

function number(name, raw) {
  const value = raw === undefined ? "" : decodeLossy(raw);
  if (value === "") return { value: null };
  if (/^[0-9]+$/.test(value)) {
    const n = BigInt(value);
    if (n <= MAX_U64) return { value: n };
  }
  return { bad: { name, value } };
}
