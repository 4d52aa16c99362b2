/** A call of the gateway's API with an API key, as any client makes it: the status and the JSON answer (undefined when empty). */
export async function callApi(
  baseUrl: string,
  key: string,
  path: string,
  init: { method?: string; json?: unknown } = {},
): Promise<{ status: number; body: any }> {
  const res = await fetch(`${baseUrl}${path}`, {
    method: init.method ?? 'GET',
    headers: { 'x-api-key': key, ...(init.json !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(init.json !== undefined ? { body: JSON.stringify(init.json) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}
