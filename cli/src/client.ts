/**
 * A small client of the gateway's HTTP API for CLI commands, with messages a person can act on.
 */
export class CliError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'CliError';
  }
}

export interface Connection {
  url: string;
  apiKey: string;
  tenantId?: string;
}

export class GatewayClient {
  constructor(private readonly connection: Connection) {}

  get tenantId(): string | undefined {
    return this.connection.tenantId;
  }

  async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const url = new URL(path, this.connection.url);
    let response: Response;
    try {
      response = await fetch(url, {
        method,
        headers: {
          'x-api-key': this.connection.apiKey,
          ...(this.connection.tenantId ? { 'x-tenant-id': this.connection.tenantId } : {}),
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        body: body !== undefined ? JSON.stringify(body) : undefined,
      });
    } catch (error) {
      throw new CliError(`cannot reach the gateway at ${this.connection.url}: is Berth running? (make up)`, { cause: error });
    }
    const text = await response.text();
    const payload = text ? (JSON.parse(text) as unknown) : undefined;
    if (!response.ok) throw new CliError(`${method} ${path} failed (${response.status}): ${describeDetail(payload)}`);
    return payload as T;
  }
}

function describeDetail(payload: unknown): string {
  const detail = (payload as { detail?: unknown } | undefined)?.detail;
  if (typeof detail === 'string') return detail;
  if (Array.isArray(detail)) {
    return detail.map((d: { loc?: unknown[]; msg?: string }) => `${(d.loc ?? []).join('.')}: ${d.msg}`).join('; ');
  }
  return JSON.stringify(payload);
}
