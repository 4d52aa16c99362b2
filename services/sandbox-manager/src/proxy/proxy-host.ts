/**
 * The container adapter's side of the auth proxy: one {@link SandboxProxy} per instance, on the
 * Unix socket the adapter bind-mounts into that instance (the in-sandbox agent bridges it to
 * 127.0.0.1:3128 inside).
 */
import type { Logger } from '@berth/log';
import type { EgressPolicy } from '../drivers/driver.js';
import type { ProxyCa } from './proxy-ca.js';
import { SandboxProxy } from './sandbox-proxy.js';

/** A running proxy of one instance. */
export interface OpenProxy {
  /** Replaces its rules and lists live. */
  update(policy: EgressPolicy): void;
  close(): Promise<void>;
}

/** What the container driver takes to give each instance its proxy. */
export interface ProxyHostPort {
  open(instance: string, socketPath: string, policy: EgressPolicy): Promise<OpenProxy>;
}

export interface ProxyHostOptions {
  ca: ProxyCa;
  logger: Logger;
  /** Extra CAs trusted for upstream TLS (tests' local HTTPS servers). */
  upstreamCa?: string[];
}

export class ProxyHost implements ProxyHostPort {
  private readonly open_ = new Map<string, SandboxProxy>();

  constructor(private readonly options: ProxyHostOptions) {}

  /** The CA sandboxes must trust for intercepted HTTPS. */
  get caCertPem(): string {
    return this.options.ca.certPem;
  }

  /**
   * Serves `instance`'s proxy on `socketPath`, replacing one it already has (a restarted instance).
   * EgressPolicyError when the policy does not compile.
   */
  async open(instance: string, socketPath: string, policy: EgressPolicy): Promise<OpenProxy> {
    await this.open_.get(instance)?.close();
    const proxy = new SandboxProxy({
      listen: { path: socketPath },
      policy,
      ca: this.options.ca,
      logger: this.options.logger.child({ instance }),
      ...(this.options.upstreamCa ? { upstreamCa: this.options.upstreamCa } : {}),
    });
    await proxy.listen();
    this.open_.set(instance, proxy);
    return {
      update: (next) => proxy.update(next),
      close: async () => {
        if (this.open_.get(instance) === proxy) this.open_.delete(instance);
        await proxy.close();
      },
    };
  }

  /** Closes every instance's proxy (the service is stopping). */
  async close(): Promise<void> {
    const proxies = [...this.open_.values()];
    this.open_.clear();
    await Promise.all(proxies.map((proxy) => proxy.close()));
  }
}
