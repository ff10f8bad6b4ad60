// Runs a Worker module in workerd through miniflare, for tests/suite/edge.rs and the benchmark:
//   node miniflare-run.mjs <runtimes dir> <worker.js> <port> origin <url>
//   node miniflare-run.mjs <runtimes dir> <worker.js> <port> r2 <tree folder>
// With r2, the bucket bound as TREE is filled with every file of the tree, keyed by its path, as
// `gen publish` writes them (an archive's folder: its root and parts/, the root put last). Prints "ready" when it answers; stops workerd on SIGTERM/SIGINT.
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";

const [runtimes, script, port, mode, where] = process.argv.slice(2);
const require = createRequire(join(runtimes, "package.json"));
const { Miniflare } = await import(pathToFileURL(require.resolve("miniflare")).href);

const mf = new Miniflare({
  // the module's text, not its path: workerd refuses paths outside its starting folder
  modules: [{ type: "ESModule", path: "worker.js", contents: readFileSync(script, "utf8") }],
  compatibilityDate: "2025-01-01",
  host: "127.0.0.1",
  port: Number(port),
  r2Buckets: ["TREE"],
  bindings: mode === "origin" ? { ORIGIN: where } : {},
});
const stop = async () => {
  await mf.dispose();
  process.exit(0);
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
await mf.ready;
// a Buffer shares a pool: R2's put wants an ArrayBuffer of the file's bytes alone
const arrayBuffer = (b) => b.buffer.slice(b.byteOffset, b.byteOffset + b.length);
if (mode === "r2") {
  const bucket = await mf.getR2Bucket("TREE");
  const walk = (dir) =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(join(dir, e.name)) : [join(dir, e.name)]));
  // the root last: the tests wait for the root's bytes (tests/suite/parity.rs, wait_ready), so
  // an answered root means a filled bucket
  // (an archive's: its `root`, the commit point)
  const root = existsSync(join(where, "root")) ? join(where, "root") : join(where, "api", "v2", "index.json");
  const files = walk(where).filter((f) => f !== root);
  // a few puts at a time, each tried again when the local connection to workerd drops
  const put = async (f) => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await bucket.put(relative(where, f), arrayBuffer(readFileSync(f)));
      } catch (e) {
        if (attempt === 5) throw e;
        await new Promise((resolve) => setTimeout(resolve, 100 * attempt));
      }
    }
  };
  // a line every 512 files: the test waits while the filling goes on, not for a fixed time
  for (let i = 0; i < files.length; i += 32) {
    await Promise.all(files.slice(i, i + 32).map(put));
    if ((i + 32) % 512 === 0) console.log(`filled ${i + 32} of ${files.length} files`);
  }
  if (existsSync(root)) await put(root);
}
console.log("ready");
