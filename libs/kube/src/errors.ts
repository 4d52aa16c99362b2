/** Reading failed API calls: the HTTP status, and the API server's own words for people. */
import { ApiException } from '@kubernetes/client-node';

/** Whether a client-node call failed with this HTTP status (404 not found, 409 conflict, …). */
export function isStatus(error: unknown, code: number): boolean {
  return error instanceof ApiException && error.code === code;
}

/** The API server's own words for a failed call (the `Status` message), else the error text. */
export function describeApiError(error: unknown): string {
  if (error instanceof ApiException) {
    try {
      const status = JSON.parse(String(error.body)) as { message?: string };
      if (status.message) return `${status.message} (HTTP ${error.code})`;
    } catch {
      // Not a Status object (a proxy in between, or no body): fall through.
    }
    // client-node drops the body of a 401.
    if (error.code === 401) return 'Unauthorized: the Kubernetes API rejected the credentials (HTTP 401)';
    return `HTTP ${error.code} from the Kubernetes API`;
  }
  return error instanceof Error ? error.message : String(error);
}
