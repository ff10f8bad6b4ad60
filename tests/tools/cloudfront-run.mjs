// Runs a CloudFront Function (`gen config cloudfront`) in Node for tests/suite/edge.rs: NOT CloudFront's
// own runtime (cloudfront-js-2.0), but the event shape AWS documents for a viewer request
// ("CloudFront Functions event structure"), built from each request read as JSON from stdin:
//   [{"method": "GET", "target": "/api/v2/berry/?limit=5", "headers": {"name": "value"}}, ...]
// Prints, one per request, what the function returned: {"uri": ..., "querystring": ...} for a
// rewritten request, {"statusCode": ..., "headers": ..., "body": ...} for an answer.
import { readFileSync } from "node:fs";
import vm from "node:vm";

const code = readFileSync(process.argv[2], "utf8");
const context = vm.createContext({});
vm.runInContext(code, context);
const requests = JSON.parse(readFileSync(0, "utf8"));

function event({ method, target, headers }) {
  const question = target.indexOf("?");
  const uri = question < 0 ? target : target.slice(0, question);
  const querystring = {};
  if (question >= 0) {
    for (const pair of target.slice(question + 1).split("&")) {
      if (pair === "") continue;
      const equals = pair.indexOf("=");
      const name = equals < 0 ? pair : pair.slice(0, equals);
      const value = equals < 0 ? "" : pair.slice(equals + 1);
      if (querystring[name]) {
        const entry = querystring[name];
        entry.multiValue = entry.multiValue ?? [{ value: entry.value }];
        entry.multiValue.push({ value });
      } else {
        querystring[name] = { value };
      }
    }
  }
  const lower = {};
  for (const [name, value] of Object.entries(headers ?? {})) lower[name.toLowerCase()] = { value };
  return {
    version: "1.0",
    context: { distributionDomainName: "d111111abcdef8.cloudfront.net", distributionId: "EDFDVBD6EXAMPLE", eventType: "viewer-request", requestId: "test" },
    viewer: { ip: "198.51.100.11" },
    request: { method, uri, querystring, headers: lower, cookies: {} },
  };
}

const results = requests.map((r) => vm.runInContext("handler", context)(event(r)));
process.stdout.write(JSON.stringify(results));
