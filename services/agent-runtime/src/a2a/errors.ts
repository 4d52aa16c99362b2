/**
 * A2A's own JSON-RPC error codes (spec section 5.4 / 9.5), each a JsonRpcError with `data` naming
 * what it is about.
 */
import { JsonRpcError } from '../api/json-rpc.js';

export const TASK_NOT_FOUND = -32001;
export const TASK_NOT_CANCELABLE = -32002;
export const PUSH_NOT_SUPPORTED = -32003;
export const UNSUPPORTED_OPERATION = -32004;
export const VERSION_NOT_SUPPORTED = -32009;

export const taskNotFound = (taskId: string) => new JsonRpcError(TASK_NOT_FOUND, `Task ${taskId} not found`, { taskId });
export const notCancelable = (taskId: string, state: string) =>
  new JsonRpcError(TASK_NOT_CANCELABLE, `Task ${taskId} is ${state}: it cannot be canceled`, { taskId, state });
export const pushNotSupported = () =>
  new JsonRpcError(
    PUSH_NOT_SUPPORTED,
    'Push notifications are not supported by this server: it has no webhook signing secret, or its langgraph.json sets http.disable_webhooks',
  );
export const unsupported = (message: string, data?: Record<string, unknown>) => new JsonRpcError(UNSUPPORTED_OPERATION, message, data);
