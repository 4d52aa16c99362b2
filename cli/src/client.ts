/**
 * A small client of the gateway's HTTP API for CLI commands, with messages a person can act on.
 */
import { sseFrames, type SseFrame } from '@berth/http';

export class CliError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'CliError';
  }
}

/** Nothing answered at the gateway's address (refused, unknown host, no answer in time). */
export class GatewayUnreachableError extends CliError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'GatewayUnreachableError';
  }
}

/** The gateway answered with an error status. */
export class GatewayHttpError extends CliError {
  constructor(
    message: string,
    readonly status: number,
    /** The `detail` of the answer, as text. */
    readonly detail: string,
  ) {
    super(message);
    this.name = 'GatewayHttpError';
  }
}

export interface Connection {
  url: string;
  /** Sent as X-Api-Key. */
  apiKey?: string;
  /** Sent as `Authorization: Bearer` (from `berth login`) when there is no apiKey. */
  token?: string;
  tenantId?: string;
}

export interface RequestOptions {
  /** Gives up after this many milliseconds. */
  timeoutMs?: number;
}

/** A raw request body (e.g. a tarball), streamed rather than JSON-encoded. */
export interface RawBody {
  stream: ReadableStream<Uint8Array>;
  contentType: string;
  /** Sent as Content-Length when known, so the gateway can refuse an oversized body at once. */
  length?: number;
}

export class GatewayClient {
  constructor(private readonly connection: Connection) {}

  get tenantId(): string | undefined {
    return this.connection.tenantId;
  }

  get url(): string {
    return this.connection.url;
  }

  /** The API key this client sends, if it sends one (`berth dev` traces with it). */
  get apiKey(): string | undefined {
    return this.connection.apiKey;
  }

  /** The credential this client sends: an API key, a `berth login` token, or none. */
  get credential(): 'api_key' | 'token' | 'none' {
    return this.connection.apiKey ? 'api_key' : this.connection.token ? 'token' : 'none';
  }

  /** Sends a request with this client's credential; a gateway it cannot reach throws GatewayUnreachableError. */
  private async send(path: string, init: RequestInit & { headers?: Record<string, string>; duplex?: 'half' }): Promise<Response> {
    const { apiKey, token, tenantId } = this.connection;
    try {
      return await fetch(new URL(path, this.connection.url), {
        ...init,
        headers: {
          ...(apiKey ? { 'x-api-key': apiKey } : token ? { authorization: `Bearer ${token}` } : {}),
          ...(tenantId ? { 'x-tenant-id': tenantId } : {}),
          ...init.headers,
        },
      } as RequestInit);
    } catch (error) {
      throw new GatewayUnreachableError(
        `cannot reach Berth at ${this.connection.url}${reason(error)}: check --url or BERTH_HOST_URL, or start the platform with \`berth up\``,
        { cause: error },
      );
    }
  }

  /**
   * Reads the server-sent events a GET answers (a log followed with `follow=true`) until the
   * stream ends or `signal` aborts (then it just ends); error statuses throw GatewayHttpError.
   */
  async *events(path: string, options: { signal?: AbortSignal; lastEventId?: string } = {}): AsyncGenerator<SseFrame> {
    let response: Response;
    try {
      response = await this.send(path, {
        method: 'GET',
        headers: { accept: 'text/event-stream', ...(options.lastEventId ? { 'last-event-id': options.lastEventId } : {}) },
        ...(options.signal ? { signal: options.signal } : {}),
      });
    } catch (error) {
      if (options.signal?.aborted) return;
      throw error;
    }
    if (!response.ok) await this.answer('GET', path, response);
    if (!response.body) return;
    try {
      yield* sseFrames(response.body);
    } catch (error) {
      if (!options.signal?.aborted) throw new CliError(`the stream of ${path} broke: ${(error as Error).message}`, { cause: error });
    }
  }

  /** Sends a JSON body (or a raw one) and parses the JSON answer; error statuses throw GatewayHttpError. */
  async request<T>(method: string, path: string, body?: unknown, options: RequestOptions = {}): Promise<T> {
    const raw = body instanceof Object && 'stream' in body && (body as RawBody).stream instanceof ReadableStream ? (body as RawBody) : undefined;
    const response = await this.send(path, {
      method,
      headers: raw
        ? { 'content-type': raw.contentType, ...(raw.length !== undefined ? { 'content-length': String(raw.length) } : {}) }
        : body !== undefined
          ? { 'content-type': 'application/json' }
          : {},
      body: raw ? raw.stream : body !== undefined ? JSON.stringify(body) : undefined,
      // A stream body goes out as it is read (fetch requires saying so).
      ...(raw ? { duplex: 'half' } : {}),
      ...(options.timeoutMs ? { signal: AbortSignal.timeout(options.timeoutMs) } : {}),
    });
    return this.answer<T>(method, path, response);
  }

  /** The JSON answer of a response; error statuses throw GatewayHttpError (or CliError, saying what to do). */
  private async answer<T>(method: string, path: string, response: Response): Promise<T> {
    const { apiKey, token } = this.connection;
    const text = await response.text();
    let payload: unknown;
    try {
      payload = text ? (JSON.parse(text) as unknown) : undefined;
    } catch (error) {
      throw new CliError(`${method} ${path} answered ${response.status} with something that is not JSON: is ${this.connection.url} a Berth gateway?`, {
        cause: error,
      });
    }
    if (response.status === 401 && !apiKey && token) {
      throw new CliError(`the login token for ${this.connection.url} is no longer valid (expired, or its API key was revoked): run \`berth login\` again`);
    }
    if (!response.ok) {
      const detail = describeDetail(payload);
      if (apiKey && (response.status === 401 || response.status === 403)) {
        throw new GatewayHttpError(
          `${this.connection.url} refused the API key (${response.status}: ${detail}): check --api-key or BERTH_API_KEY, or run \`berth login\``,
          response.status,
          detail,
        );
      }
      throw new GatewayHttpError(`${method} ${path} failed (${response.status}): ${detail}`, response.status, detail);
    }
    return payload as T;
  }
}

/** ` (ECONNREFUSED)` and the like: why fetch failed, in the words of the system. */
function reason(error: unknown): string {
  if ((error as Error)?.name === 'TimeoutError') return ' (no answer in time)';
  const cause = (error as { cause?: { code?: string; message?: string } })?.cause;
  const code = cause?.code ?? cause?.message;
  return code ? ` (${code})` : '';
}

function describeDetail(payload: unknown): string {
  const detail = (payload as { detail?: unknown } | undefined)?.detail;
  if (typeof detail === 'string') return detail;
  if (Array.isArray(detail)) {
    return detail.map((d: { loc?: unknown[]; msg?: string }) => `${(d.loc ?? []).join('.')}: ${d.msg}`).join('; ');
  }
  return JSON.stringify(payload);
}
