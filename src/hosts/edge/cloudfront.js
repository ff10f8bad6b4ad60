// CloudFront Function (runtime cloudfront-js-2.0), viewer request, for a tree in S3 behind
// CloudFront. A CloudFront Function cannot read the origin, so it rewrites: each request to the
// file the tree holds for it (the root, records by id and by name, sub-documents, meta,
// openapi.json, the bulk-data files at their own paths, the list pages the tree holds, the whole list for offset 0 and any limit at
// least the count), and answers the rest itself with gen serve's JSON errors (400 for a
// malformed limit or offset, 404 for a resource the tree does not hold or a page it holds no
// file for, 405, OPTIONS preflights). A record the tree does not hold is S3's own 403/404.
// The rewritten uri is the cache key: no query string needs to be in it.
// CORS and Cache-Control on the files: attach a response headers policy (see docs/deploy.md).

// Rust counterparts: each JavaScript function on the left ports the Rust function on the right
// (`decode` only ASCII escapes, `pageQuery` only the page). tests/suite/docs.rs checks that both exist; tests/vectors/*.json
// holds the cases both answer alike, checked in Rust (src/serve/vectors.rs) and here
// (tests/tools/vectors.mjs):
//   handler    src/serve/respond.rs decide
//   normalize  src/serve/route.rs   normalize
//   decode     src/serve/route.rs   percent_decode
//   pageQuery  src/serve/route.rs   list_query
//   number     src/serve/route.rs   number
//   pageFile   src/paging.rs        precomputed_pages
//   preflight  src/serve/respond.rs echoable
//   isBulkFile src/tree/layout.rs   is_bulk_file

function handler(event) {
  var request = event.request;
  var method = request.method;
  if (method === "OPTIONS") return preflight(request);
  if (method !== "GET" && method !== "HEAD") {
    return reply(405, fill(FACTS.errors.method_not_allowed, { Method: method }), { allow: { value: "GET, HEAD, OPTIONS" } });
  }
  var path = request.uri;
  var key = normalize(path);
  if (key === null) return reply(404, fill(FACTS.errors.not_a_document, { Path: path.slice(0, 200) }));
  var parts = key.split("/");
  var segment = parts[2];
  if (parts.length === 3 && key.indexOf(".") < 0 && Object.prototype.hasOwnProperty.call(FACTS.resources, segment)) {
    var page = pageQuery(request.querystring || {});
    if (page.bad) {
      var which = page.bad.name === "limit" ? (page.bad.value.charAt(0) === "-" ? "limit_negative" : "limit") : "offset";
      return reply(400, fill(FACTS.errors["bad_" + which], { Value: page.bad.value }));
    }
    var count = FACTS.resources[segment];
    var file = pageFile(count, page);
    if (file === null) {
      return reply(
        404,
        fill(FACTS.errors.page_not_held, { Segment: segment, Count: String(count), Offset: page.offsetText, Limit: page.limitText }),
      );
    }
    request.uri = "/api/v2/" + segment + "/" + file + "index.json";
    request.querystring = {};
    return request;
  }
  if (
    segment !== undefined &&
    !Object.prototype.hasOwnProperty.call(FACTS.resources, segment) &&
    FACTS.singletons.indexOf(segment) < 0
  ) {
    return reply(404, fill(FACTS.errors.no_resource, { Segment: segment }));
  }
  // a document that is a file of its own (openapi.json, a bulk-data file), else a folder's index.json
  request.uri = FACTS.files.indexOf(key) >= 0 || isBulkFile(key) ? "/" + key : "/" + key + "/index.json";
  request.querystring = {};
  return request;
}

/** True for a bulk-data file's key (`api/v2/bulk-data/berry-<hash>.ndjson.gz`). */
function isBulkFile(key) {
  return /^api\/v2\/bulk-data\/[a-z0-9-]+\.ndjson\.gz$/.test(key);
}

/** The index key of a path (`api/v2/berry/1`), or null, as gen serve reads paths. */
function normalize(path) {
  if (path.charAt(0) !== "/") return null;
  var rest = path.slice(1);
  if (rest.charAt(rest.length - 1) === "/") rest = rest.slice(0, -1);
  var segments = rest.split("/");
  for (var i = 0; i < segments.length; i++) {
    var decoded = decode(segments[i]);
    if (decoded === null || !/^[A-Za-z0-9._-]+$/.test(decoded) || /^\.+$/.test(decoded)) return null;
    segments[i] = decoded.toLowerCase();
  }
  var key = segments.join("/");
  return key === "api/v2" || key.indexOf("api/v2/") === 0 ? key : null;
}

/** Percent-decodes ASCII escapes; null for a malformed escape (or a non-ASCII byte). */
function decode(text) {
  var out = "";
  for (var i = 0; i < text.length; i++) {
    if (text.charAt(i) === "%") {
      var hex = text.slice(i + 1, i + 3);
      if (!/^[0-9A-Fa-f]{2}$/.test(hex)) return null;
      var code = parseInt(hex, 16);
      if (code > 127) return null;
      out += String.fromCharCode(code);
      i += 2;
    } else {
      out += text.charAt(i);
    }
  }
  return out;
}

/** The page asked for: offset and limit as numbers (Infinity when too long to matter) and as
 * normalised digits; or {bad}. The last value of a repeated parameter wins, as in gen serve. */
function pageQuery(querystring) {
  var values = {};
  for (var name in querystring) {
    var entry = querystring[name];
    var decodedName = decode(name);
    var value = entry.multiValue && entry.multiValue.length ? entry.multiValue[entry.multiValue.length - 1].value : entry.value;
    if (decodedName === "limit" || decodedName === "offset") values[decodedName] = value;
  }
  var limit = number("limit", values.limit);
  if (limit.bad) return limit;
  var offset = number("offset", values.offset);
  if (offset.bad) return offset;
  if (limit.digits === null || limit.digits === "0") limit = { digits: String(FACTS.default_limit) };
  if (offset.digits === null) offset = { digits: "0" };
  return {
    limit: limit.digits.length > 15 ? Infinity : Number(limit.digits),
    offset: offset.digits.length > 15 ? Infinity : Number(offset.digits),
    limitText: limit.digits,
    offsetText: offset.digits,
  };
}

function number(name, raw) {
  var value = raw === undefined ? "" : decode(raw);
  if (value === null) value = raw;
  if (value === "") return { digits: null };
  if (/^[0-9]+$/.test(value)) {
    var digits = value.replace(/^0+(?=.)/, "");
    var max = "18446744073709551615";
    if (digits.length < max.length || (digits.length === max.length && digits <= max)) return { digits: digits };
  }
  return { bad: { name: name, value: value } };
}

/** The page file under the list's folder (`_pages/20/40/`), or null when the tree holds none. */
function pageFile(count, page) {
  if (page.offset === 0 && page.limit >= count) return "_pages/all/";
  for (var i = 0; i < FACTS.page_sizes.length; i++) {
    var size = FACTS.page_sizes[i];
    var aligned = Math.max(Math.ceil(count / size), 1);
    var last = (aligned - 1) * size;
    var shrunken = FACTS.links === "query" && last > 0 && page.offset === last && page.limit === count - last;
    var held = page.limit === size && page.offset % size === 0 && page.offset / size < aligned;
    if (held || shrunken) return "_pages/" + page.limit + "/" + page.offset + "/";
  }
  return null;
}

/** A body template filled in (see the edge handler's `fill`). */
function fill(template, values) {
  var out = "";
  for (var i = 0; i < template.length; i++) {
    if (i % 2 === 0) {
      out += template[i];
    } else {
      var value = String(values[template[i]] === undefined ? "" : values[template[i]]);
      if (template[i - 1].slice(-2) === '\\"') value = value.replace(/[\\"]/g, "\\$&");
      out += JSON.stringify(value).slice(1, -1);
    }
  }
  return out;
}

function reply(status, body, extra) {
  var headers = {
    "content-type": { value: "application/json; charset=utf-8" },
    "cache-control": { value: "no-store" },
    "access-control-allow-origin": { value: "*" },
  };
  for (var name in extra || {}) headers[name] = extra[name];
  var reasons = { 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed" };
  return { statusCode: status, statusDescription: reasons[status], headers: headers, body: { encoding: "text", data: body } };
}

function preflight(request) {
  var headers = {
    allow: { value: "GET, HEAD, OPTIONS" },
    "access-control-allow-origin": { value: "*" },
    "access-control-allow-methods": { value: "GET, HEAD" },
    "access-control-max-age": { value: "86400" },
    vary: { value: "Access-Control-Request-Headers" },
  };
  var asked = request.headers["access-control-request-headers"];
  var value = asked ? asked.value.trim() : "";
  if (value !== "" && value.length <= 1024 && /^[A-Za-z0-9\-_, \t]+$/.test(value)) {
    headers["access-control-allow-headers"] = { value: value };
  }
  return { statusCode: 204, statusDescription: "No Content", headers: headers };
}
