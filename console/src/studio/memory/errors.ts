/**
 * What the agent server said when an SDK call failed: the SDK throws `HTTP 422: <body>`; people
 * should read the body's `detail` (a sentence, or the fields at fault and why), not the raw JSON.
 */

interface Issue {
  loc?: unknown[];
  msg?: string;
}

/** The SDK's HTTPError: the status and the response's text. */
interface HttpError {
  status: number;
  text: string;
}

const isHttpError = (error: unknown): error is HttpError =>
  error instanceof Error && typeof (error as Partial<HttpError>).status === 'number' && typeof (error as Partial<HttpError>).text === 'string';

/** The `detail` of an error response: a string, the list of field issues, or undefined when there is none. */
function detailOf(error: unknown): string | Issue[] | undefined {
  if (!isHttpError(error)) return undefined;
  try {
    const detail = (JSON.parse(error.text) as { detail?: unknown }).detail;
    if (typeof detail === 'string' || Array.isArray(detail)) return detail as string | Issue[];
  } catch {
    // Not JSON (a proxy's page): the message says what there is.
  }
  return undefined;
}

/** A sentence for people: the server's detail when it gave one (each field issue as `field: why`). */
export function describeError(error: unknown): string {
  const detail = detailOf(error);
  if (typeof detail === 'string') return detail;
  if (detail?.length) {
    return detail
      .map((issue) => {
        const field = (issue.loc ?? []).filter((part) => part !== 'body').join('.');
        return field ? `${field}: ${issue.msg ?? 'invalid'}` : (issue.msg ?? 'invalid');
      })
      .join('; ');
  }
  return error instanceof Error ? error.message : String(error);
}

/** Whether the server refused a search's `query` (no semantic search: langgraph.json has no store.index). */
export function refusesQuery(error: unknown): boolean {
  const detail = detailOf(error);
  return isHttpError(error) && error.status === 422 && Array.isArray(detail) && detail.some((issue) => issue.loc?.at(-1) === 'query');
}
