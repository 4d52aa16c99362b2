/**
 * The gateway's gRPC clients of one internal service: one channel per service descriptor, made on
 * first use and shared by every route. Without an address, a call answers 503 (UnavailableError)
 * with a message that says what to configure.
 */
import type { DescService } from '@bufbuild/protobuf';
import { UnavailableError } from '@berth/errors';
import { createRpcClient, type RpcClient, type RpcClientOptions } from '@berth/rpc';

export class ServiceClients {
  readonly #clients = new Map<DescService, RpcClient<DescService>>();
  readonly #options: RpcClientOptions;

  /**
   * @param address `host:port` of the service's gRPC server; without one, calls answer 503.
   * @param internalToken sent on every call (`BERTH_INTERNAL_TOKEN`).
   * @param maxMessageBytes largest message either way.
   * @param missing the 503 message when no address is configured.
   */
  constructor(
    private readonly address: string | undefined,
    internalToken: string | undefined,
    maxMessageBytes: number,
    private readonly missing: string,
  ) {
    this.#options = {
      internalToken,
      channelOptions: { 'grpc.max_receive_message_length': maxMessageBytes, 'grpc.max_send_message_length': maxMessageBytes },
    };
  }

  /** Whether the service is configured. */
  get configured(): boolean {
    return this.address !== undefined;
  }

  close(): void {
    for (const client of this.#clients.values()) client.close();
    this.#clients.clear();
  }

  protected client<S extends DescService>(service: S): RpcClient<S> {
    if (!this.address) throw new UnavailableError(this.missing);
    let client = this.#clients.get(service);
    if (!client) {
      client = createRpcClient(service, this.address, this.#options) as unknown as RpcClient<DescService>;
      this.#clients.set(service, client);
    }
    return client as unknown as RpcClient<S>;
  }
}
