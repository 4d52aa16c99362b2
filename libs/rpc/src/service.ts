/**
 * The usual shape of a Berth gRPC service process: one server, the standard health service
 * reporting the server (`''`) and the service's own name as SERVING, the service's handlers.
 */
import type { Logger } from '@berth/log';
import { Health } from '@berth/proto';
import type grpc from '@grpc/grpc-js';
import { HealthService } from './health.js';
import { createRpcServer, type RpcServer } from './server.js';

/** Options of {@link startGrpcService}. */
export interface GrpcServiceOptions {
  /** The name the health service reports, e.g. the service's proto package `berth.controlplane.v1`. */
  name: string;
  /** Interface to bind, e.g. `127.0.0.1` or `0.0.0.0`. */
  host: string;
  /** Port to bind; 0 picks a free one. */
  port: number;
  logger?: Logger;
  /** Adds the service's own implementations before the server listens. */
  setup?: (server: RpcServer) => void;
  /**
   * How long `close()` waits for calls in flight before cancelling them.
   * @default 2000
   */
  shutdownTimeoutMs?: number;
  /**
   * The internal token every call but health checks must carry (see `RpcServerOptions.internalToken`).
   * @default none: no check — for tests and development only
   */
  internalToken?: string;
  /** Extra grpc-js server options, e.g. a larger `grpc.max_receive_message_length`. */
  grpcOptions?: grpc.ServerOptions;
}

/** A started service. */
export interface RunningGrpcService {
  /** A dialable `host:port` (`127.0.0.1:PORT` when bound to a wildcard address). */
  address: string;
  port: number;
  /** Its health statuses; `setStatus` to report NOT_SERVING while degraded. */
  health: HealthService;
  /** Reports NOT_SERVING to health watchers, then closes the server. */
  close(): Promise<void>;
}

/** Starts a gRPC server with the health service and the service's handlers, listening at once. */
export async function startGrpcService(options: GrpcServiceOptions): Promise<RunningGrpcService> {
  const health = new HealthService({ '': 'SERVING', [options.name]: 'SERVING' });
  const { logger, shutdownTimeoutMs, internalToken, grpcOptions } = options;
  const server = createRpcServer({ logger, shutdownTimeoutMs, internalToken, ...(grpcOptions ? { grpcOptions } : {}) });
  server.add(Health, health.implementation);
  options.setup?.(server);
  const { address, port } = await server.listen(options.host, options.port);
  return {
    address,
    port,
    health,
    close: async () => {
      health.setStatus(options.name, 'NOT_SERVING');
      health.setStatus('', 'NOT_SERVING');
      await server.close();
    },
  };
}
