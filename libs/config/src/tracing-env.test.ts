import { describe, expect, it } from '@jest/globals';
import { ConfigError, parseTracingEnv } from './index.js';

describe('parseTracingEnv', () => {
  it('is off without an endpoint, an empty one included (shells export VAR=)', () => {
    expect(parseTracingEnv({})).toEqual({});
    expect(parseTracingEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: '', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '' })).toEqual({});
  });

  it("sends traces to the base endpoint's /v1/traces, or to the traces endpoint as given", () => {
    expect(parseTracingEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' })).toEqual({ otlpTracesEndpoint: 'http://collector:4318/v1/traces' });
    expect(
      parseTracingEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://traces.example.com/otlp' }),
    ).toEqual({ otlpTracesEndpoint: 'https://traces.example.com/otlp' });
  });

  it('reads the export headers, URL-decoded', () => {
    expect(parseTracingEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20abc, x-team=ops' })).toEqual({
      otlpTracesEndpoint: 'http://c:4318/v1/traces',
      otlpHeaders: { authorization: 'Bearer abc', 'x-team': 'ops' },
    });
  });

  it('refuses an endpoint that is not an http(s) URL and headers that are not key=value', () => {
    expect(() => parseTracingEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' })).toThrow(ConfigError);
    expect(() => parseTracingEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_HEADERS: 'token' })).toThrow(ConfigError);
  });
});
