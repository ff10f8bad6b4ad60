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
//
// The handler is printed as one module: this file (the entry, `handle`), then route.js,
// list.js, paging.js, reply.js and origin.js, each named for the Rust room it ports.

// Rust counterparts: each JavaScript function on the left ports the Rust function on the right
// (`debugEscape` with the table `debug_escaped` bakes from Rust's own `{:?}`). tests/suite/docs.rs
// checks that both exist; tests/vectors/*.json holds the cases both answer alike, checked in Rust
// (src/serve/vectors.rs) and here (tests/tools/vectors.mjs). Each file of the handler has its own
// table:
//   handle            src/serve/respond.rs decide
//   find              src/serve/respond.rs decide_routed

const MAX_U64 = 18446744073709551615n;

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
    // answered before any header is read, as gen serve's HTTP reader answers it: no deploy headers
    return new Response(facts.errors.request_line_too_long[0], { status: 414, headers: facts.reader_headers });
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
    return documentReply(facts, request, body.document, revalidate, link, null, body.gzip);
  } catch (e) {
    const message = e && e.message ? e.message : String(e);
    if (e instanceof OriginFault && e.status === 503) {
      const detail = facts.archive
        ? `the archive's origin does not hold whole what the archive's root names (a part missing, damaged or cut short): ${message}; retry in a moment (a publish may be under way), and if this goes on, publish the whole archive again with gen publish, or print the handler again for the archive published`
        : `the tree's origin holds a file that does not match the tree this handler was printed for: ${message}; retry in a moment (a publish may be under way), and if this goes on, publish the whole tree, or print the handler again for the tree published`;
      return errorReply(facts, 503, JSON.stringify({ detail }));
    }
    const detail = `the tree's origin could not be read (${message}); retry in a moment`;
    return errorReply(facts, 502, JSON.stringify({ detail }));
  }
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
  const found = await origin.getStored(facts.files.includes(key) ? key : `${key}/index.json`);
  return found === null ? null : { document: found.bytes, gzip: found.gzip };
}
