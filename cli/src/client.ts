/**
 * A small client of the gateway's HTTP API for CLI commands, with messages a person can act on.
 */
export class CliError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'CliError';
  }
}

/** Nothing answered at the gateway's address (refused, unknown host, no answer in time). */
export class GatewayUnreachableError extends CliError {
  constructor(
    message: string,
    /** Why, in the system's words, e.g. ` (ECONNREFUSED)`. */
    readonly why: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'GatewayUnreachableError';
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

export class GatewayClient {
  constructor(private readonly connection: Connection) {}

  get tenantId(): string | undefined {
    return this.connection.tenantId;
  }

  get url(): string {
    return this.connection.url;
  }

  async request<T>(method: string, path: string, body?: unknown, options: RequestOptions = {}): Promise<T> {
    const url = new URL(path, this.connection.url);
    const { apiKey, token, tenantId } = this.connection;
    let response: Response;
    try {
      response = await fetch(url, {
        method,
        headers: {
          ...(apiKey ? { 'x-api-key': apiKey } : token ? { authorization: `Bearer ${token}` } : {}),
          ...(tenantId ? { 'x-tenant-id': tenantId } : {}),
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        body: body !== undefined ? JSON.stringify(body) : undefined,
        ...(options.timeoutMs ? { signal: AbortSignal.timeout(options.timeoutMs) } : {}),
      });
    } catch (error) {
      const why = reason(error);
      throw new GatewayUnreachableError(`cannot reach the gateway at ${this.connection.url}${why}: is Berth running? (make up)`, why, {
        cause: error,
      });
    }
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
    if (!response.ok) throw new CliError(`${method} ${path} failed (${response.status}): ${describeDetail(payload)}`);
    return payload as T;
  }
}

/** ` (ECONNREFUSED)` and the like: why fetch failed, in the words of the system. */
export function reason(error: unknown): string {
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
