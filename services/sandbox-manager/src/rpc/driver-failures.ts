/**
 * The one place where a driver's failures become the Berth errors callers get (and so statuses):
 * a missing file is a 404, another file error or a command that cannot start (no such working
 * directory) the caller's (400); an instance that is gone or broken
 * is a 409 (the sandbox is not ready; its status says why once the reaper has looked); any of them
 * while the engine does not answer is a 503 with Retry-After. Applied to every handler of a service.
 */
import { ConflictError, InvalidArgumentError, NotFoundError } from '@berth/errors';
import type { ServiceImplementation } from '@berth/rpc';
import type { DescService } from '@bufbuild/protobuf';
import { CommandStartError, InstanceError, InstanceNotFoundError, SandboxFileError } from '../drivers/driver.js';
import { EngineUnavailableError, type EngineMonitor } from '../sandboxes/engine-monitor.js';

export async function driverFailure(error: unknown, engine: EngineMonitor): Promise<unknown> {
  if (error instanceof SandboxFileError) {
    return error.kind === 'not_found' ? new NotFoundError(error.message, { cause: error }) : new InvalidArgumentError(error.message, { cause: error });
  }
  if (error instanceof CommandStartError) return new InvalidArgumentError(error.message, { cause: error });
  if (!(error instanceof InstanceError || error instanceof InstanceNotFoundError)) return error;
  if (!(await engine.check())) return new EngineUnavailableError({ cause: error });
  return new ConflictError(error instanceof InstanceNotFoundError ? 'the sandbox’s instance is gone; delete the sandbox, or start it again' : error.message, {
    cause: error,
  });
}

async function* mapped<T>(stream: AsyncIterable<T>, engine: EngineMonitor): AsyncGenerator<T> {
  try {
    yield* stream;
  } catch (error) {
    throw await driverFailure(error, engine);
  }
}

/** Every handler of `implementation`, its driver failures mapped (promises and streams alike). */
export function withDriverFailures<S extends DescService>(implementation: ServiceImplementation<S>, engine: EngineMonitor): ServiceImplementation<S> {
  const handlers = implementation as Record<string, (...args: unknown[]) => unknown>;
  return Object.fromEntries(
    Object.entries(handlers).map(([name, handler]) => [
      name,
      (...args: unknown[]) => {
        const result = handler(...args);
        if (result instanceof Promise) return result.catch(async (error: unknown) => Promise.reject(await driverFailure(error, engine)));
        return mapped(result as AsyncIterable<unknown>, engine);
      },
    ]),
  ) as ServiceImplementation<S>;
}
