/** The metrics of every HTTP and gRPC server, recorded by @berth/http and @berth/rpc so that no service says them again. */
import { histogram } from './registry.js';

// --- HTTP servers (recorded by @berth/http's request log) ---

const HTTP_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

const httpDuration = histogram<'method' | 'route' | 'status'>({
  name: 'berth_http_request_duration_seconds',
  help: 'HTTP requests served, by method, route template (`unmatched` when no route served it) and status; _count is the number of requests',
  labelNames: ['method', 'route', 'status'],
});

/** The route label of a request no declared route served (404s, a project's own routes). */
const UNMATCHED_ROUTE = 'unmatched';

/**
 * Records one finished HTTP request. `route` is a template (`/threads/{thread_id}`), never a URL:
 * a URL carries ids, and a caller choosing URLs would choose the number of series.
 */
export function observeHttpRequest(request: { method: string; route: string | undefined; status: number; seconds: number }): void {
  httpDuration.observe(
    {
      method: HTTP_METHODS.has(request.method) ? request.method : 'other',
      route: request.route ?? UNMATCHED_ROUTE,
      status: String(request.status),
    },
    request.seconds,
  );
}

// --- gRPC servers (recorded by @berth/rpc's server) ---

const grpcDuration = histogram<'grpc_service' | 'grpc_method' | 'grpc_code'>({
  name: 'berth_grpc_server_handling_seconds',
  help: 'gRPC calls handled, by service, method and status code; _count is the number of calls',
  labelNames: ['grpc_service', 'grpc_method', 'grpc_code'],
});

/** Records one finished gRPC call: `path` is the call's `/package.Service/Method`, `code` the name of its status (`OK`, `NOT_FOUND`). */
export function observeGrpcCall(call: { path: string; code: string; seconds: number }): void {
  const [, service = 'unknown', method = 'unknown'] = call.path.split('/');
  grpcDuration.observe({ grpc_service: service, grpc_method: method, grpc_code: call.code }, call.seconds);
}
