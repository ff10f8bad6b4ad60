// The edge handler: answers every request for a built tree as `gen serve --keep-urls` does,
// byte for byte in the body, reading the tree's files from an origin (an HTTP(S) base url, or a
// Cloudflare R2 bucket). Written once; `gen config cloudflare|deno|node` print it with the
// tree's facts (`facts`, baked from out/manifest.json) and a thin wrapper per host
// (src/hosts/edge.rs). Web-standard Request, Response, URL, fetch and crypto only: no npm
// dependency at run time. The origins it reads through, bounded and checked, are in origin.js.
//
// Bounded work per request: a document or a page the tree holds is one origin read; a page it
// holds no file for, with a limit up to the largest page size, is read from at most two page
// files of the smallest page size at least the limit (their entries sliced as raw text, never
// parsed and serialised again); a larger limit reads the list's `_pages/all` file once. A page
// past the end of a list reads nothing. A `?q=` search reads two: the resource's `_pages/all` file
// and its names document (and its shards, one at a time, for a resource of more than 50,000
// records), matched line by line. One declared filter (`?FIELD=VALUE`) reads its value's list as a list
// is read, after its first page (for the count): at most three reads. Several filters, or a
// filter with `?q=`, read each value's `_pages/all` file (at most 8, gen serve's bound too;
// none after a value no record takes), and for `q` the two a search reads.

// Rust counterparts: each JavaScript function on the left ports the Rust function on the right
// (`debugEscape` with the table `debug_escaped` bakes from Rust's own `{:?}`). tests/suite/docs.rs checks that both exist; tests/vectors/*.json
// holds the cases both answer alike, checked in Rust (src/serve/vectors.rs) and here
// (tests/tools/vectors.mjs):
//   handle            src/serve/respond.rs decide
//   stripOrigin       src/serve/route.rs   strip_origin
//   find              src/serve/respond.rs decide_routed
//   route             src/serve/route.rs   route
//   listAnswer        src/serve/list.rs    answer
//   normalize         src/serve/route.rs   normalize
//   percentDecode     src/serve/route.rs   percent_decode
//   decodeLossy       src/serve/route.rs   decode_lossy
//   listQuery         src/serve/route.rs   list_query
//   pageOf            src/paging.rs        requested
//   number            src/serve/route.rs   number
//   badParam          src/answers.rs       bad_param
//   listPage          src/serve/list.rs    page
//   fold              src/search.rs        fold
//   encodeQueryValue  src/search.rs        encode_query_value
//   orderConditions   src/filters.rs       order_conditions
//   ignoredParams     src/filters.rs       ignored
//   ignoredHeader     src/filters.rs       ignored_header
//   folderName        src/tree/layout.rs   folder_name
//   narrowedPage      src/serve/list.rs    narrowed
//   matchingNames     src/serve/list.rs    matching_names
//   sha256Hex         src/search.rs        sha256_hex
//   namesOutOfStep    src/answers.rs       tree_changed
//   nextPage          src/paging.rs        next
//   nextLinked        src/paging.rs        next_linked
//   previousPage      src/paging.rs        previous
//   holds             src/paging.rs        precomputed_pages
//   renderPage        src/paging.rs        render_page
//   notFound          src/serve/respond.rs not_found
//   debugEscape       src/hosts/edge.rs    debug_escaped
//   preflight         src/serve/respond.rs echoable
//   documentReply     src/serve/respond.rs etag_matches

const MAX_U64 = 18446744073709551615n;
const ALLOW = "GET, HEAD, OPTIONS";
const ALLOW_METHODS = "GET, HEAD";
const PREFLIGHT_MAX_AGE = "86400";
const PREFLIGHT_VARY = "Access-Control-Request-Headers";
const MAX_SHOWN_PATH = 200;
const JSON_TYPE = "application/json; charset=utf-8";
const BULK_CACHE_CONTROL = "public, max-age=31536000, immutable";
const IGNORED_HEADER = "Gen-Ignored";
const MAX_IGNORED_NAMED = 16;
const MAX_IGNORED_NAME = 64;

/**
 * The answer to `request` for the tree `facts` describes, read from `origin`. `target` is the
 * request target as the client sent it (path and query), when the host gives it; else the
 * request url's path and query.
 */
export async function handle(facts, request, origin, target) {
  if (target === undefined) {
    const url = new URL(request.url);
    target = url.pathname + url.search;
  }
  const method = request.method;
  const length = new TextEncoder().encode(target).length;
  // the request line gen serve reads, `METHOD TARGET HTTP/1.1`, then the target alone
  if (method.length + length + 10 > facts.max_request_line) {
    // answered before any header is read: no deploy headers
    const headers = { "Access-Control-Allow-Origin": "*", "Content-Type": JSON_TYPE, "Cache-Control": "no-store" };
    return new Response(facts.errors.request_line_too_long[0], { status: 414, headers });
  }
  if (length > facts.max_target) return errorReply(facts, 414, fill(facts, facts.errors.target_too_long, { Length: length }));
  if (method === "OPTIONS") return preflight(facts, request.headers.get("Access-Control-Request-Headers"));
  if (method !== "GET" && method !== "HEAD") {
    return errorReply(facts, 405, fill(facts, facts.errors.method_not_allowed, { Method: method }), true);
  }
  try {
    const body = await find(facts, treeOrigin(facts, origin), stripOrigin(target));
    if (typeof body === "object" && body !== null && body.error) return errorReply(facts, body.status, body.error);
    if (body === null) return errorReply(facts, 404, notFound(facts, target));
    if (body.bulk !== undefined) return bulkReply(facts, request, body.bulk);
    if (body.list !== undefined) return documentReply(facts, request, body.list, false, null, body.ignored);
    // meta and the bulk-data index are revalidated on every use, as gen serve and gen publish's
    // upload send them
    const key = normalize(stripOrigin(target).split("?")[0]);
    const revalidate = facts.revalidated.includes(key);
    // the root names the bulk-data index, which it does not list, in a Link header
    const link = key === "api/v2" ? facts.root_link : null;
    return documentReply(facts, request, body, revalidate, link);
  } catch (e) {
    const message = e && e.message ? e.message : String(e);
    if (e instanceof OriginFault && e.status === 503) {
      const detail = `the tree's origin holds a file that does not match the tree this handler was printed for: ${message}; retry in a moment (a publish may be under way), and if this goes on, publish the whole tree, or print the handler again for the tree published`;
      return errorReply(facts, 503, JSON.stringify({ detail }));
    }
    const detail = `the tree's origin could not be read (${message}); retry in a moment`;
    return errorReply(facts, 502, JSON.stringify({ detail }));
  }
}

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
 * The document `target` names (bytes), `null` when the tree holds none, or `{status, error}`:
 * src/serve/respond.rs `decide_routed`, step by step. The target is read once (`route`).
 */
async function find(facts, origin, target) {
  const { route: where, query } = route(facts, target);
  if (where.kind === "none") return null;
  const segment = where.kind === "list" ? where.segment : where.key.split("/")[2];
  const isList = segment !== undefined && Object.hasOwn(facts.resources, segment);
  // every document of the tree is the root's, a list's or a singleton's (meta, openapi.json)
  if (segment !== undefined && !isList && !facts.singletons.includes(segment)) return null;
  if (where.kind === "list" && isList) {
    if (query.page.bad) return { status: 400, error: badParam(facts, query.page.bad) };
    const answer = await listAnswer(facts, origin, segment, query, query.page);
    // a page names the parameters it ignored (gen serve's Gen-Ignored header)
    if (answer === null || answer.error !== undefined) return answer;
    const declared = facts.filters[segment] ?? [];
    return { list: answer, ignored: ignoredHeader(declared, ignoredParams(declared, query.params)) };
  }
  const key = where.kind === "list" ? `api/v2/${segment}` : where.key;
  // a bulk-data file: streamed as it is, never held whole (src/serve/stream.rs)
  if (isBulkFile(key)) {
    const file = await origin.stream(key);
    return file === null ? null : { bulk: file };
  }
  // a document that is a file of its own (api/v2/openapi.json), else a folder's index.json
  return origin.get(facts.files.includes(key) ? key : `${key}/index.json`);
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
 * The answer to `query` of the list of `segment`, asking for `page` (src/serve/list.rs `answer`):
 * the parameters matched against the declared filters (a resource without filters ignores them,
 * as the public API does), then the page, narrowed or not.
 */
async function listAnswer(facts, origin, segment, query, page) {
  const declared = facts.filters[segment] ?? [];
  const conditions = orderConditions(declared, declared.length === 0 ? [] : query.conditions);
  if (conditions.bad !== undefined) {
    return { status: 400, error: fill(facts, facts.errors.not_a_filter[segment], { Value: conditions.bad }) };
  }
  // each condition may be one read of its value's list: bounded, as gen serve bounds it
  if (conditions.length > facts.max_conditions) return { status: 400, error: fill(facts, facts.errors.too_many_filters, {}) };
  if (query.q === null && conditions.length === 0) {
    return listPage(facts, origin, segment, BigInt(facts.resources[segment]), page);
  }
  return narrowedPage(facts, origin, segment, query.q, conditions, page);
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

/** The page `limit` and `offset` (as sent) ask for (src/paging.rs `requested`), or `{bad}`. */
function pageOf(facts, limit, offset) {
  const l = number("limit", limit);
  if (l.bad) return l;
  const o = number("offset", offset);
  if (o.bad) return o;
  const defaultLimit = BigInt(facts.default_limit);
  return { offset: o.value ?? 0n, limit: l.value === null || l.value === 0n ? defaultLimit : l.value };
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

function badParam(facts, { name, value }) {
  const which = name === "limit" ? (value.startsWith("-") ? "limit_negative" : "limit") : "offset";
  return fill(facts, facts.errors[`bad_${which}`], { Value: value });
}

/** The path of a tree file under the list of `segment`. */
function listFile(segment, rest) {
  return `api/v2/${segment}/${rest}index.json`;
}

const min = (a, b) => (a < b ? a : b);

/**
 * `page` of the list of `segment` (`count` entries): a file of the tree, or rendered from them.
 * `folder` (under `api/v2/`) and `tail` name another list of the same entries' shape: a filter's
 * value's list, whose page files are in its own folder and whose query links carry `tail`.
 */
async function listPage(facts, origin, segment, count, page, folder = segment, tail = "") {
  if (page.offset === 0n && page.limit >= count) return pageFile(origin, listFile(folder, "_pages/all/"), count, count);
  if (holds(facts, count, page)) {
    const held = min(page.limit, count - page.offset);
    return pageFile(origin, listFile(folder, `_pages/${page.limit}/${page.offset}/`), count, held);
  }
  const start = min(page.offset, count);
  const end = min(min(page.offset + page.limit, MAX_U64), count);
  let entries = [];
  if (start < end) {
    const size = facts.page_sizes.map(BigInt).find((s) => s >= page.limit);
    if (size === undefined) {
      const all = entriesOf(await pageFile(origin, listFile(folder, "_pages/all/"), count, count));
      entries = all.slice(Number(start), Number(end));
    } else {
      // at most two aligned pages of `size` hold entries [start, end), as limit ≤ size
      const first = start / size;
      const last = (end - 1n) / size;
      for (let k = first; k <= last; k++) {
        // the page holding the whole list is `_pages/all/` (a filter's value list has no other)
        const path = listFile(folder, k === 0n && size >= count ? "_pages/all/" : `_pages/${size}/${k * size}/`);
        entries.push(...entriesOf(await pageFile(origin, path, count, min(size, count - k * size))));
      }
      entries = entries.slice(Number(start - first * size), Number(end - first * size));
    }
  }
  const url = `${facts.base_url}/api/v2/${segment}/`;
  const files = `${facts.base_url}/api/v2/${folder}/`;
  const link = (p) =>
    p === null ? null : facts.links === "path" ? `${files}_pages/${p.limit}/${p.offset}/` : `${url}?offset=${p.offset}&limit=${p.limit}${tail}`;
  const next = nextLinked(page, count, facts.links);
  return new TextEncoder().encode(renderPage(count, link(next), link(previousPage(page)), entries, facts.pretty));
}

async function mustGet(origin, path) {
  const body = await origin.get(path);
  if (body === null) throw new Error(`it holds no ${path}, which the tree's manifest lists: publish the whole tree, or print the handler again for the tree published`);
  return body;
}

/** The page file at `path` of a list of `count` entries, checked: its `count` says so, and it
 * holds the `entries` the list has there. */
async function pageFile(origin, path, count, entries) {
  const bytes = await mustGet(origin, path);
  checkPage(bytes, path, count, entries);
  return bytes;
}

function checkPage(bytes, path, count, entries) {
  if (pageCount(bytes) !== count) throw new OriginFault(503, `${path} is not a page of a list of ${count} entries`);
  const held = countEntries(bytes);
  if (held !== entries) throw new OriginFault(503, `${path} holds ${held} entries where its list has ${entries}`);
}

/** The `count` a page file starts with (as the page renderer writes it), `null` when none. */
function pageCount(bytes) {
  const head = new TextDecoder().decode(bytes.subarray(0, 64));
  const found = /^\s*\{\s*"count"\s*:\s*([0-9]+)[,\s]/.exec(head);
  return found === null ? null : BigInt(found[1]);
}

/**
 * Calls `onEntry(start, end)` with the byte range of each entry of a page document's `results`
 * (the objects at nesting depth 3), scanning its bytes once: the structural characters are
 * ASCII, so no byte of a multi-byte character is taken for one.
 */
function scanEntries(bytes, onEntry) {
  let depth = 0;
  let inString = false;
  let start = -1;
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i];
    if (inString) {
      if (c === 92) i++;
      else if (c === 34) inString = false;
    } else if (c === 34) {
      inString = true;
    } else if (c === 123 || c === 91) {
      depth++;
      if (c === 123 && depth === 3) start = i;
    } else if (c === 125 || c === 93) {
      if (c === 125 && depth === 3) onEntry(start, i + 1);
      depth--;
    }
  }
}

/** The number of entries of a page document's `results`, as [`scanEntries`] finds them. */
function countEntries(bytes) {
  let count = 0n;
  scanEntries(bytes, () => count++);
  return count;
}

/**
 * `q` folded for matching, as src/search.rs folds it (the names document holds names folded
 * so by the build): NFKD, combining marks removed, case folded, final sigma as sigma.
 */
function fold(text) {
  return text.normalize("NFKD").replace(/\p{M}/gu, "").toUpperCase().toLowerCase().replaceAll("ς", "σ");
}

/** `text` percent-encoded for a query value: every byte but `A-Za-z0-9-._~`, as src/search.rs does. */
function encodeQueryValue(text) {
  let out = "";
  for (const b of new TextEncoder().encode(text)) {
    const keep = isAlphanumeric(b) || b === 45 || b === 46 || b === 95 || b === 126;
    out += keep ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

/**
 * The conditions `given`, as `[field index, value]` pairs ordered by the field's place among the
 * `declared` names, then as given, each once (src/filters.rs, `order_conditions`); `{bad: name}`
 * for the first parameter that is no declared filter.
 */
function orderConditions(declared, given) {
  const out = [];
  for (const [name, value] of given) {
    const field = declared.indexOf(name);
    if (field < 0) return { bad: name };
    if (!out.some(([f, v]) => f === field && v === value)) out.push([field, value]);
  }
  return out.map((c, i) => [c, i]).sort((a, b) => a[0][0] - b[0][0] || a[1] - b[1]).map(([c]) => c);
}

/** The names of `params` that are no `declared` filter: the parameters a list answer ignored. */
function ignoredParams(declared, params) {
  return params.filter((name) => !declared.includes(name));
}

/**
 * The Gen-Ignored header's value for the `ignored` parameters of a list that declares the
 * filters `declared`, `null` for none (docs/serve.md, "Ignored parameters"): each name encoded as
 * a query value, at most 16 of at most 64 characters, the others counted (`(3 more)`).
 */
function ignoredHeader(declared, ignored) {
  if (ignored.length === 0) return null;
  const named = [];
  let more = 0;
  for (const name of ignored) {
    const encoded = encodeQueryValue(name);
    if (named.length < MAX_IGNORED_NAMED && encoded.length <= MAX_IGNORED_NAME) named.push(encoded);
    else more++;
  }
  if (more > 0) named.push(`(${more} more)`);
  return `${named.join(", ")}; declared: ${declared.length === 0 ? "(none)" : declared.join(", ")}`;
}

/** The folder a field name or value is written under, as src/tree/layout.rs `folder_name` names it. */
function folderName(text) {
  if (text === "") return "_";
  let out = "";
  for (const b of new TextEncoder().encode(text)) {
    const keep = (b >= 97 && b <= 122) || (b >= 48 && b <= 57) || b === 45;
    out += keep ? String.fromCharCode(b) : `_${b.toString(16).padStart(2, "0")}`;
  }
  return out;
}

/**
 * `page` of the records of the list of `segment` that match `q` (a name or localized name
 * containing it, folded; `null`: any) and every condition (`[field index, value]`), as gen serve
 * answers it (src/serve/list.rs `narrowed`): one condition alone, with a value the tree holds, is that
 * value's list; anything else is rendered with query links.
 */
async function narrowedPage(facts, origin, segment, q, conditions, page) {
  const declared = facts.filters[segment] ?? [];
  const folderOf = ([field, value]) => `${segment}/_filters/${folderName(declared[field])}/${folderName(value)}`;
  const tailOf = (list) => list.map(([field, value]) => `&${encodeQueryValue(declared[field])}=${encodeQueryValue(value)}`).join("");
  if (q === null && conditions.length === 1) {
    const first = await origin.get(listFile(folderOf(conditions[0]), ""));
    if (first !== null) {
      const count = BigInt(JSON.parse(new TextDecoder().decode(first)).count);
      if (page.offset === 0n && page.limit === BigInt(facts.default_limit) && count > page.limit) return first;
      return listPage(facts, origin, segment, count, page, folderOf(conditions[0]), tailOf(conditions));
    }
  }
  // a tree built before names documents: no search, as gen serve answers it (404)
  if (q !== null && !facts.searchable.includes(segment)) return null;
  const sets = [];
  for (const condition of conditions) {
    const path = listFile(folderOf(condition), "_pages/all/");
    const all = await origin.get(path);
    if (all !== null) checkPage(all, path, pageCount(all), pageCount(all));
    sets.push(new Set(all === null ? [] : entriesOf(all)));
    // a value no record takes: nothing matches, and no other list needs reading
    if (all === null) break;
  }
  let found;
  if (sets.some((set) => set.size === 0)) {
    found = [];
  } else if (q === null) {
    found = [...sets[0]].filter((entry) => sets.every((set) => set.has(entry)));
  } else {
    const allBytes = await mustGet(origin, listFile(segment, "_pages/all/"));
    const all = entriesOf(allBytes);
    const stamp = { count: all.length, sha256: await sha256Hex(allBytes) };
    const positions = await matchingNames(origin, segment, fold(q), stamp);
    if (positions === null) return { status: 503, error: namesOutOfStep(segment) };
    found = positions.map((i) => all[i]).filter((entry) => sets.every((set) => set.has(entry)));
  }
  const total = BigInt(found.length);
  const start = min(page.offset, total);
  const end = min(min(page.offset + page.limit, MAX_U64), total);
  const shown = found.slice(Number(start), Number(end));
  const url = `${facts.base_url}/api/v2/${segment}/`;
  const search = q === null ? "" : `&q=${encodeQueryValue(q)}`;
  const link = (p) => (p === null ? null : `${url}?offset=${p.offset}&limit=${p.limit}${search}${tailOf(conditions)}`);
  return new TextEncoder().encode(renderPage(total, link(nextPage(page, total)), link(previousPage(page)), shown, facts.pretty));
}

/**
 * The list positions of the entries of the names document of `segment` whose keys contain
 * `folded` (a folded `q`), in order; `null` when it does not belong to the list `stamp` names
 * (its count and the SHA-256 of its `_pages/all` file: a publish stopped between the two). One
 * read, or for a split one (more than 50,000 records, src/search.rs) one more per shard, one
 * after the other: each file is matched line by line (one entry per line), holding one shard's
 * bytes and one entry at a time.
 */
async function matchingNames(origin, segment, folded, stamp) {
  const found = [];
  const read = async (rest, offset, count, shard) => {
    const bytes = await mustGet(origin, listFile(segment, rest));
    const decoder = new TextDecoder();
    let end = bytes.indexOf(10);
    const line = decoder.decode(end < 0 ? bytes : bytes.subarray(0, end));
    let head;
    try {
      head = JSON.parse(end < 0 ? line : `${line.replace(/,"results":\[$/, "")}}`);
    } catch {
      return null;
    }
    const sameList = head.list?.count === stamp.count && head.list?.sha256 === stamp.sha256;
    if (!sameList || head.count !== count || head.offset !== (shard ? offset : undefined)) return null;
    if (end < 0) return shard || !Array.isArray(head.shards) ? null : head;
    let seen = 0;
    let closed = false;
    for (let start = end + 1; start < bytes.length; start = end + 1) {
      end = bytes.indexOf(10, start);
      if (end < 0) end = bytes.length;
      let text = decoder.decode(bytes.subarray(start, end));
      if (text === "]}" && end === bytes.length) {
        closed = true;
        break;
      }
      if (text.endsWith(",")) text = text.slice(0, -1);
      let entry;
      try {
        entry = JSON.parse(text);
      } catch {
        return null;
      }
      if (!Array.isArray(entry.keys)) return null;
      if (entry.keys.some((key) => key.includes(folded))) found.push(offset + seen);
      seen++;
    }
    return closed && seen === count ? head : null;
  };
  const doc = await read("_names/", 0, stamp.count, false);
  if (doc === null) return null;
  if (doc.shards === undefined) return found;
  let offset = 0;
  for (let k = 0; k < doc.shards.length; k++) {
    const { count } = doc.shards[k];
    if (doc.shards[k].offset !== offset || (await read(`_names/${k}/`, offset, count, true)) === null) return null;
    offset += count;
  }
  return offset === stamp.count ? found : null;
}

/** The SHA-256 of `bytes`, lower-case hex (src/search.rs `sha256_hex`). */
async function sha256Hex(bytes) {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
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

/** The page `next` points to by the public API's rule (the last page's limit shrinks). */
function nextPage(page, count) {
  const end = min(page.offset + page.limit, MAX_U64);
  return count > end ? { offset: end, limit: min(page.limit, count - end) } : null;
}

/** The page `next` links to in a tree with links `style` (src/paging.rs `next_linked`): for path
 * links the same offset with the limit kept, naming the page file of the aligned chain. */
function nextLinked(page, count, style) {
  const next = nextPage(page, count);
  return next !== null && style === "path" ? { offset: next.offset, limit: page.limit } : next;
}

/** The page `previous` points to (src/paging.rs `previous`), `null` on the first. */
function previousPage(page) {
  return page.offset > 0n ? { offset: page.offset > page.limit ? page.offset - page.limit : 0n, limit: min(page.limit, page.offset) } : null;
}

/** True when the tree holds `page` as a file: an aligned page of a page size, or (query links)
 * the shrunken last page that `next` names (docs/tree.md, "Page files"). */
function holds(facts, count, page) {
  for (const s of facts.page_sizes) {
    const size = BigInt(s);
    const aligned = count === 0n ? 1n : (count + size - 1n) / size;
    if (page.limit === size && page.offset % size === 0n && page.offset / size < aligned) return true;
    const last = (aligned - 1n) * size;
    if (facts.links === "query" && last > 0n && page.offset === last && page.limit === count - last) return true;
  }
  return false;
}

/** The raw text of each entry of a page document's `results`, as [`scanEntries`] finds them. */
function entriesOf(bytes) {
  const decoder = new TextDecoder("utf-8", { ignoreBOM: true });
  const entries = [];
  scanEntries(bytes, (start, end) => entries.push(decoder.decode(bytes.subarray(start, end))));
  return entries;
}

/** A list page in the API's key order, as gen's page renderer writes it (src/paging.rs). */
function renderPage(count, next, previous, entries, pretty) {
  const [open, sep, colon, nl, indent] = pretty ? ["{\n", ",\n", ": ", "\n", "  "] : ["{", ",", ":", "", ""];
  const field = (key) => `${indent}"${key}"${colon}`;
  let out = `${open}${field("count")}${count}${sep}`;
  for (const [key, link] of [["next", next], ["previous", previous]]) {
    out += `${field(key)}${link === null ? "null" : JSON.stringify(link)}${sep}`;
  }
  out += field("results");
  if (entries.length === 0) {
    out += "[]";
  } else {
    out += "[";
    entries.forEach((entry, i) => {
      if (i > 0) out += ",";
      if (pretty) out += "\n    ";
      out += entry;
    });
    out += `${nl}${indent}]`;
  }
  return `${out}${nl}}`;
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

async function documentReply(facts, request, bytes, revalidate, link = null, ignored = null) {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  const etag = `"${Array.from(digest.slice(0, 16), (b) => b.toString(16).padStart(2, "0")).join("")}"`;
  const headers = commonHeaders(facts);
  if (ignored !== null) {
    headers.set(IGNORED_HEADER, ignored);
    const exposed = headers.get("Access-Control-Expose-Headers");
    headers.set("Access-Control-Expose-Headers", exposed === null ? IGNORED_HEADER : `${exposed}, ${IGNORED_HEADER}`);
  }
  headers.set("ETag", etag);
  headers.set("Cache-Control", revalidate ? "no-cache" : facts.cache_control);
  if (link) headers.set("Link", link);
  const tags = request.headers.get("If-None-Match");
  if (tags !== null && tags.split(",").some((t) => { const tag = t.trim().replace(/^W\//, ""); return tag === "*" || tag === etag; })) {
    return new Response(null, { status: 304, headers });
  }
  headers.set("Content-Type", JSON_TYPE);
  return new Response(request.method === "HEAD" ? null : bytes, { status: 200, headers });
}
