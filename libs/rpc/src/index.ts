/**
 * `@berth/rpc` — gRPC between Berth services over `@grpc/grpc-js`, driven by the protobuf-es v2
 * service descriptors of `@berth/proto`. Handlers throw `@berth/errors` classes; clients receive
 * the same classes (see `status.ts` for the one mapping).
 */
export { createRpcClient } from './client.js';
export type { RpcClientOptions } from './client.js';
export { methodPath } from './codec.js';
export { RpcCancelledError, RpcConfigurationError, RpcCredentialsRefusedError, RpcListenError } from './errors.js';
export { HealthService, checkHealth } from './health.js';
export type { CheckHealthOptions, HealthStatus, SettableHealthStatus } from './health.js';
export { startHealthListener } from './health-http.js';
export type { HealthCheck, HealthListenerOptions, RunningHealthListener } from './health-http.js';
export { Pushable } from './pushable.js';
export { createRpcServer } from './server.js';
export type { ListenAddress, RpcServer, RpcServerOptions } from './server.js';
export { startGrpcService } from './service.js';
export type { GrpcServiceOptions, RunningGrpcService } from './service.js';
export { ERROR_DETAIL_TRAILER, INTERNAL_ERROR_MESSAGE, errorOfStatus, statusOfError } from './status.js';
export type { ErrorSite } from './status.js';
export type {
  BidiStreamingMethodImpl,
  CallContext,
  ClientStreamingMethodImpl,
  CallOptions,
  ClientMethod,
  MethodImpl,
  RpcClient,
  ServerStreamingMethodImpl,
  ServiceImplementation,
  SupportedMethodKind,
  SupportedMethodName,
  UnaryMethodImpl,
} from './types.js';
