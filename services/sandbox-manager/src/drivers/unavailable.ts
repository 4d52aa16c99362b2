/**
 * The driver of a platform where no sandbox can run (no container engine, no cluster access): every
 * call says why and how to enable sandboxes, so the API answers 503 with that text and the rest of
 * the platform is unaffected.
 */
import type { SandboxDriver } from './driver.js';

export class UnavailableDriver implements SandboxDriver {
  readonly kind = 'container' as const;

  constructor(readonly reason: string) {}

  async unavailableReason(): Promise<string> {
    return this.reason;
  }

  private refuse(): never {
    throw new Error(this.reason);
  }

  pullImage(): never {
    return this.refuse();
  }
  create(): never {
    return this.refuse();
  }
  stop(): never {
    return this.refuse();
  }
  start(): never {
    return this.refuse();
  }
  async remove(): Promise<void> {
    // Nothing can exist.
  }
  async removeVolume(): Promise<void> {
    // Nothing can exist.
  }
  async inspect() {
    return { state: 'missing' as const };
  }
  async list(): Promise<string[]> {
    return [];
  }
  async claim(): Promise<boolean> {
    return false;
  }
  exec(): never {
    return this.refuse();
  }
  writeFile(): never {
    return this.refuse();
  }
  readFile(): never {
    return this.refuse();
  }
  async close(): Promise<void> {
    // Nothing to release.
  }
}
