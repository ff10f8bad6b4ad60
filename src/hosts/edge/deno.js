// Deno Deploy and Netlify Edge Functions. The tree is read from the HTTP(S) base url in the
// environment variable ORIGIN (a bucket's public endpoint, any static host), or from the folder
// a `file://` url there names (`deno task serve` of `gen config deno --project`). Run directly
// (`deno run --allow-net --allow-env handler.js`, or on Deno Deploy) it serves on HOST:PORT
// (default 0.0.0.0:8000); imported by Netlify, its default export answers /api/v2 and below.
const origin = () => {
  const base = Deno.env.get("ORIGIN");
  if (!base) throw new Error("set the environment variable ORIGIN to the base url under which the tree's files are");
  return base.startsWith("file:") ? fileOrigin(base) : httpOrigin(base);
};

/** An origin reading the tree's files from the folder the `file://` url `base` names. */
function fileOrigin(base) {
  const root = decodeURIComponent(new URL(base).pathname).replace(/\/+$/, "");
  return {
    async get(path) {
      try {
        return await Deno.readFile(`${root}/${path}`);
      } catch (e) {
        if (e?.name === "NotFound" || e?.name === "IsADirectory") return null;
        throw e;
      }
    },
  };
}

export default (request) => handle(FACTS, request, origin());

export const config = { path: ["/api/v2", "/api/v2/*"] };

if (import.meta.main) {
  const hostname = Deno.env.get("HOST") ?? "0.0.0.0";
  const port = Number(Deno.env.get("PORT") ?? "8000");
  Deno.serve({ hostname, port, onListen: () => console.log(`listening on http://${hostname}:${port}/api/v2/`) }, (request) =>
    handle(FACTS, request, origin()),
  );
}
