// The range sources the archive origin (archive.js) reads: an HTTP(S) base url (`Range`
// requests), an R2 bucket binding (`get(key, {range})`), a folder on this machine (Deno, Node).
// Each `read(file, offset, length, total)` gives the bytes, `null` when the file is not there; a
// file whose size is not the `total` the archive's root gives, a range the origin cannot give
// (416), or one it gives other than asked (Content-Range) is a 503; a failed origin a 502.
// Printed after archive.js, in the same module (src/hosts/edge.rs).

/** Range reads of the archive's files under an HTTP(S) base url (`<base>/root`, `<base>/parts/<hash>`). */
function httpRanges(base) {
  const at = String(base).replace(/\/+$/, "");
  const timed = async (file, read) => {
    try {
      return await read();
    } catch (e) {
      if (e && (e.name === "TimeoutError" || e.name === "AbortError")) {
        throw new OriginFault(502, `the origin did not answer ${file} within ${ORIGIN_TIMEOUT_MS / 1000} s`);
      }
      throw e;
    }
  };
  const ask = (file, headers) => fetch(`${at}/${file}`, { headers, signal: AbortSignal.timeout(ORIGIN_TIMEOUT_MS) });
  const drop = (reply) => reply.body?.cancel().catch(() => {});
  /** The reply to a Range request for `length` bytes at `offset` of `file` (`total` bytes), checked; `null`: missing. */
  const ranged = async (file, offset, length, total) => {
    const reply = await ask(file, { Range: `bytes=${offset}-${offset + length - 1}` });
    // a bucket without list permission answers 403 for a key it does not hold
    if (reply.status === 404 || reply.status === 403) return drop(reply), null;
    if (reply.status === 416) {
      drop(reply);
      throw new OriginFault(503, `${file} is truncated: the origin holds no byte ${offset} of it, the archive's root says it has ${total}`);
    }
    if (reply.status === 200 && offset === 0 && length === total && reply.headers.get("Content-Length") === String(total)) return reply;
    if (reply.status !== 206) {
      drop(reply);
      const why = reply.status === 200 ? "the whole file to a Range request (an archive needs a store that answers Range requests)" : reply.status;
      throw new OriginFault(502, `the origin answered ${file} with ${why}`);
    }
    const range = /^bytes ([0-9]+)-([0-9]+)\/([0-9]+|\*)$/.exec(reply.headers.get("Content-Range") ?? "");
    if (range !== null && range[3] !== "*" && Number(range[3]) !== total) {
      drop(reply);
      throw new OriginFault(503, `${file} is ${range[3]} bytes where the archive's root says ${total}: truncated, or not the part named`);
    }
    if (range === null || Number(range[1]) !== offset || Number(range[2]) !== offset + length - 1) {
      drop(reply);
      throw new OriginFault(503, `the origin answered bytes ${range === null ? "(none named)" : `${range[1]}-${range[2]}`} of ${file} where ${offset}-${offset + length - 1} were asked`);
    }
    return reply;
  };
  return {
    read: (file, offset, length, total) =>
      timed(file, async () => {
        const reply = await ranged(file, offset, length, total);
        return reply === null ? null : readBounded(reply.body, file, length);
      }),
    readAll: (file, maxBytes) =>
      timed(file, async () => {
        const reply = await ask(file, {});
        if (reply.status === 404 || reply.status === 403) return drop(reply), null;
        if (!reply.ok) {
          drop(reply);
          throw new OriginFault(502, `the origin answered ${reply.status} for ${file}`);
        }
        return readBounded(reply.body, file, maxBytes);
      }),
    stream: (file, offset, length, total) =>
      timed(file, async () => {
        const reply = await ranged(file, offset, length, total);
        return reply === null ? null : reply.body;
      }),
  };
}

/** Range reads of the archive's files in an R2 bucket binding whose keys are their paths. */
function r2Ranges(bucket) {
  const get = async (file, offset, length, total) => {
    let object;
    try {
      object = await bucket.get(file, { range: { offset, length } });
    } catch (e) {
      // a range past the end of the object: R2 refuses it; its size says why
      const head = await bucket.head(file).catch(() => null);
      if (head !== null && head.size !== total) throw new OriginFault(503, `${file} is ${head.size} bytes where the archive's root says ${total}: truncated, or not the part named`);
      throw new OriginFault(502, `the bucket could not read ${file} at byte ${offset}: ${e?.message ?? e}`);
    }
    if (object === null) return null;
    if (object.size !== total) {
      object.body.cancel().catch(() => {});
      throw new OriginFault(503, `${file} is ${object.size} bytes where the archive's root says ${total}: truncated, or not the part named`);
    }
    return object;
  };
  return {
    async read(file, offset, length, total) {
      const object = await get(file, offset, length, total);
      return object === null ? null : new Uint8Array(await object.arrayBuffer());
    },
    async readAll(file, maxBytes) {
      const object = await bucket.get(file);
      if (object === null) return null;
      if (object.size > maxBytes) {
        object.body.cancel().catch(() => {});
        throw tooLarge(file, maxBytes);
      }
      return new Uint8Array(await object.arrayBuffer());
    },
    async stream(file, offset, length, total) {
      const object = await get(file, offset, length, total);
      return object === null ? null : object.body;
    },
  };
}

/** Range reads of the archive's files in `folder` on this machine, through `files` (the runtime's
 * file calls: `stat`, `read`, `readAt`, `streamAt`). */
function folderRanges(folder, files) {
  const base = folder.replace(/(.)\/+$/, "$1");
  const missing = (e) => ["NotFound", "NotADirectory"].includes(e?.name) || ["ENOENT", "ENOTDIR"].includes(e?.code);
  /** The size of `file`, `null` when it is not there; a 503 when it is not the `total` the root says. */
  const sized = async (file, total) => {
    let kind;
    try {
      kind = await files.stat(`${base}/${file}`);
    } catch (e) {
      if (missing(e)) return null;
      throw e;
    }
    if (!kind.file) throw new OriginFault(503, `${file} is not a file`);
    if (total !== undefined && kind.size !== total) {
      throw new OriginFault(503, `${file} is ${kind.size} bytes where the archive's root says ${total}: truncated, or not the part named`);
    }
    return kind.size;
  };
  return {
    ready: async () => {
      const kind = await files.stat(base).catch((e) => {
        throw new Error(`ORIGIN names the folder ${base}, which cannot be read (${e?.message ?? e})`);
      });
      if (!kind.dir) throw new Error(`ORIGIN names ${base}, which is not a folder`);
    },
    async read(file, offset, length, total) {
      if ((await sized(file, total)) === null) return null;
      return files.readAt(`${base}/${file}`, offset, length);
    },
    async readAll(file, maxBytes) {
      const size = await sized(file);
      if (size === null) return null;
      if (size > maxBytes) throw tooLarge(file, maxBytes);
      return files.read(`${base}/${file}`);
    },
    async stream(file, offset, length, total) {
      if ((await sized(file, total)) === null) return null;
      return files.streamAt(`${base}/${file}`, offset, length);
    },
  };
}

/** The origin of the handler for `facts` at `base` (the ORIGIN setting, read by `originFrom`):
 * a tree's, or for an archive the archive origin over the same place. */
function originFor(facts, base, files) {
  if (!facts.archive) return originFrom(base, files);
  return originFrom(base, files, (url) => archiveOrigin(httpRanges(url)), (path) => archiveOrigin(folderRanges(path, files)));
}

const heldOrigins = new Map();

/** The HTTP(S) origin at `base` for `facts`: for an archive, one per base url, kept (its root
 * and blocks are held in it). */
function httpOriginFor(facts, base) {
  if (!facts.archive) return httpOrigin(base);
  if (!heldOrigins.has(base)) {
    if (heldOrigins.size >= 16) heldOrigins.clear();
    heldOrigins.set(base, archiveOrigin(httpRanges(base)));
  }
  return heldOrigins.get(base);
}

/** A stream passing on the first `length` bytes of what it is given, then ending (and
 * cancelling the rest). */
function firstBytes(length) {
  let left = length;
  return new TransformStream({
    start(controller) {
      if (left === 0) controller.terminate();
    },
    transform(chunk, controller) {
      if (chunk.byteLength >= left) {
        controller.enqueue(chunk.subarray(0, left));
        left = 0;
        controller.terminate();
      } else {
        controller.enqueue(chunk);
        left -= chunk.byteLength;
      }
    },
  });
}
