// Deno Deploy and Netlify Edge Functions. The tree is read from the environment variable ORIGIN:
// the HTTP(S) base url under which its files are (a bucket's public endpoint, any static host),
// or its folder on this machine (`file:///PATH`, or a path such as `../out`: `deno task serve` of
// `gen config deno --project`). Run directly (`deno run --allow-net --allow-env handler.js`, or
// on Deno Deploy) it serves on HOST:PORT (default 127.0.0.1:8000), and refuses to start without
// a readable ORIGIN; for an archive (FACTS.archive), ORIGIN holds its root and parts/. Imported by Netlify, its default export answers /api/v2 and below.

/** Deno's file calls, for a folder origin. */
const denoFiles = {
  realPath: (path) => Deno.realPath(path),
  stat: async (path) => {
    const s = await Deno.stat(path);
    return { file: s.isFile, dir: s.isDirectory, size: s.size };
  },
  read: (path) => Deno.readFile(path),
  stream: async (path) => (await Deno.open(path)).readable,
  // an archive's part: `length` bytes at `offset` (fewer when the file ends sooner)
  readAt: async (path, offset, length) => {
    const file = await Deno.open(path);
    try {
      await file.seek(offset, Deno.SeekMode.Start);
      const out = new Uint8Array(length);
      let got = 0;
      while (got < length) {
        const n = await file.read(out.subarray(got));
        if (n === null) break;
        got += n;
      }
      return out.subarray(0, got);
    } finally {
      file.close();
    }
  },
  streamAt: async (path, offset, length) => {
    const file = await Deno.open(path);
    await file.seek(offset, Deno.SeekMode.Start);
    return file.readable.pipeThrough(firstBytes(length));
  },
};

let chosen = null;
const origin = () => (chosen ??= originFor(FACTS, Deno.env.get("ORIGIN"), denoFiles));

/**
 * `handle`, but a HEAD's document is answered as the GET (Deno sends a HEAD no body): its
 * Content-Length is the GET's, as gen serve's is, not the 0 of an empty body.
 */
async function answer(request) {
  const response = await handle(FACTS, request, origin());
  const plain = !response.headers.has("content-length") && !response.headers.has("content-encoding");
  if (request.method !== "HEAD" || response.status !== 200 || !plain) return response;
  return handle(FACTS, { method: "GET", url: request.url, headers: request.headers }, origin());
}

export default answer;

export const config = { path: ["/api/v2", "/api/v2/*"] };

if (import.meta.main) {
  try {
    await origin().ready?.();
  } catch (e) {
    console.error(`this handler cannot start: ${e && e.message ? e.message : e}`);
    Deno.exit(1);
  }
  const hostname = Deno.env.get("HOST") ?? "127.0.0.1";
  const port = Number(Deno.env.get("PORT") ?? "8000");
  Deno.serve({ hostname, port, onListen: () => console.log(`listening on http://${hostname}:${port}/api/v2/`) }, answer);
}
