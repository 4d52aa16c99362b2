/**
 * The OpenTelemetry SDK, loaded by `startTracing` only when an endpoint is configured: a process
 * that does not trace never loads it.
 */
import { diag, DiagLogLevel } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';

export interface SdkOptions {
  endpoint: string;
  headers: Record<string, string>;
  serviceName: string;
  onError: (message: string) => void;
}

export function startSdk(options: SdkOptions): { shutdown(): Promise<void> } {
  // The SDK reports failed exports through its diagnostics logger, which is silent by default.
  const report = (message: string, ...args: unknown[]) => options.onError([message, ...args.map(String)].join(' '));
  diag.setLogger({ error: report, warn: report, info: () => undefined, debug: () => undefined, verbose: () => undefined }, DiagLogLevel.WARN);
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: options.serviceName }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: options.endpoint, headers: options.headers }))],
  });
  // The global tracer provider, an AsyncLocalStorage context manager and the W3C propagator.
  provider.register();
  return {
    shutdown: async () => {
      await provider.shutdown();
      diag.disable();
    },
  };
}
