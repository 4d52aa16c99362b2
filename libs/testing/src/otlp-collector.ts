/**
 * An OTLP/HTTP collector for tests of the platform's own tracing: a plain HTTP server that decodes
 * the JSON exports (`POST /v1/traces`) and keeps every span and every `service.name` it received.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One span as OTLP/JSON encodes it (ids in hex). */
export interface ExportedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: { key: string; value: Record<string, unknown> }[];
  links?: { traceId: string; spanId: string }[];
  status?: { code?: number; message?: string };
}

export interface OtlpCollector {
  /** `http://127.0.0.1:PORT`: an `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  url: string;
  spans: ExportedSpan[];
  services: Set<string>;
  /** Path and content type of each export received. */
  exports: { path: string | undefined; type: string | undefined }[];
  close(): Promise<void>;
}

interface ExportBody {
  resourceSpans: { resource: { attributes: ExportedSpan['attributes'] }; scopeSpans: { spans: ExportedSpan[] }[] }[];
}

export async function startOtlpCollector(): Promise<OtlpCollector> {
  const spans: ExportedSpan[] = [];
  const services = new Set<string>();
  const exports: OtlpCollector['exports'] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      exports.push({ path: req.url, type: req.headers['content-type'] });
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as ExportBody;
      for (const resource of body.resourceSpans) {
        for (const attribute of resource.resource.attributes) if (attribute.key === 'service.name') services.add(String(attribute.value['stringValue']));
        for (const scope of resource.scopeSpans) spans.push(...scope.spans);
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    services,
    exports,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The value of a span's attribute (`{ stringValue }`, `{ intValue }`, ...). */
export function spanAttribute(span: ExportedSpan, key: string): Record<string, unknown> | undefined {
  return span.attributes.find((a) => a.key === key)?.value;
}
