// Cloudflare Worker (module syntax). The tree is read from the R2 bucket bound as TREE (keys are
// the tree's paths, as `gen publish` writes them), or from the HTTP(S) base url in the variable
// ORIGIN when that is set (a bucket's public endpoint, any static host). wrangler.toml:
//   main = "worker.js"
//   compatibility_date = "2025-01-01"
//   [[r2_buckets]]
//   binding = "TREE"
//   bucket_name = "<your bucket>"
// or, for an HTTP origin:  [vars]  ORIGIN = "https://<bucket endpoint>"
// For an archive (FACTS.archive), the bucket or the url holds its root and parts/ instead, and
// the directory blocks read are kept in the isolate and in the Cache API.
let archived = null;

export default {
  async fetch(request, env) {
    if (FACTS.archive && (env.ORIGIN || env.TREE)) {
      archived ??= archiveOrigin(env.ORIGIN ? httpRanges(env.ORIGIN) : r2Ranges(env.TREE), globalThis.caches?.default ?? null);
      return handle(FACTS, request, archived);
    }
    if (env.ORIGIN) return handle(FACTS, request, httpOrigin(env.ORIGIN));
    if (env.TREE) return handle(FACTS, request, r2Origin(env.TREE));
    const detail = "this Worker has no tree to read: bind an R2 bucket as TREE, or set the variable ORIGIN to the base url of the tree's files (see `gen config cloudflare --help`)";
    return new Response(JSON.stringify({ detail }), {
      status: 500,
      headers: { "Content-Type": "application/json; charset=utf-8", "Access-Control-Allow-Origin": "*", "Cache-Control": "no-store" },
    });
  },
};
