// Calls the Lambda@Edge entry point of `gen config node` (its `handler` export) in Node for
// tests/suite/edge.rs, with origin-request events in the shape AWS documents ("Lambda@Edge event
// structure", origin request, custom origin), one per request read as JSON from stdin:
//   {"origin": "127.0.0.1:8080", "requests": [{"method": "GET", "target": "/api/v2/"}, ...]}
// (the origin's host and port go into the event's custom origin, as CloudFront sends them).
// Not Lambda's own runtime. Prints each response as {status, headers, body (text)}.
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const { handler } = await import(pathToFileURL(process.argv[2]).href);
const { origin, requests } = JSON.parse(readFileSync(0, "utf8"));
const [host, port] = origin.split(":");
const out = [];
for (const { method, target } of requests) {
  const question = target.indexOf("?");
  const event = {
    Records: [
      {
        cf: {
          config: { distributionDomainName: "d111111abcdef8.cloudfront.net", distributionId: "EDFDVBD6EXAMPLE", eventType: "origin-request", requestId: "test" },
          request: {
            clientIp: "203.0.113.178",
            method,
            uri: question < 0 ? target : target.slice(0, question),
            querystring: question < 0 ? "" : target.slice(question + 1),
            headers: { host: [{ key: "Host", value: origin }] },
            origin: { custom: { domainName: host, port: Number(port), protocol: "http", path: "", sslProtocols: ["TLSv1.2"], readTimeout: 30, keepaliveTimeout: 5, customHeaders: {} } },
          },
        },
      },
    ],
  };
  const response = await handler(event);
  const body = response.body === undefined ? "" : Buffer.from(response.body, response.bodyEncoding === "base64" ? "base64" : "utf8").toString("utf8");
  out.push({ status: Number(response.status), headers: response.headers, body });
}
process.stdout.write(JSON.stringify(out));
