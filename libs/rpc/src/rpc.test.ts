import { afterEach, describe, expect, it } from '@jest/globals';
import { isMessage } from '@bufbuild/protobuf';
import { EchoResponseSchema, EchoService, Health } from '@berth/proto';
import { until } from '@berth/testing';
import { createRpcClient } from './client.js';
import { RpcCancelledError, RpcConfigurationError, RpcListenError } from './errors.js';
import { createRpcServer } from './server.js';
import { Cleanup, aborted, sleep, streamingEcho } from './__tests__/servers.js';
import { Pushable } from './pushable.js';

const cleanup = new Cleanup();
afterEach(() => cleanup.run());

function client(address: string) {
  const c = createRpcClient(EchoService, address);
  cleanup.add(() => c.close());
  return c;
}

describe('createRpcServer / createRpcClient', () => {
  it('round-trips a unary call with metadata and peer', async () => {
    let peer = '';
    const { address, port } = await cleanup.server((server) =>
      server.add(EchoService, {
        ...streamingEcho,
        echo: async (request, context) => {
          peer = context.peer;
          return { message: `echo: ${request.message}`, metadata: { ...context.metadata } };
        },
        count: async function* () {},
      }),
    );
    expect(address).toBe(`127.0.0.1:${port}`);
    expect(port).toBeGreaterThan(0);

    const response = await client(address).echo(
      { message: 'hi' },
      { metadata: { 'x-tenant-id': 'tenant-1', 'trace-bin': Buffer.from([1, 2, 3]).toString('base64') } },
    );
    expect(isMessage(response, EchoResponseSchema)).toBe(true);
    expect(response.message).toBe('echo: hi');
    expect(response.metadata['x-tenant-id']).toBe('tenant-1');
    expect(response.metadata['trace-bin']).toBe(Buffer.from([1, 2, 3]).toString('base64'));
    expect(peer).toMatch(/^127\.0\.0\.1:\d+$/);
  });

  it('streams server-streaming responses in order', async () => {
    const { address } = await cleanup.server((server) =>
      server.add(EchoService, {
        ...streamingEcho,
        echo: async () => ({}),
        count: async function* (request) {
          for (let index = 0; index < request.count; index++) yield { index };
        },
      }),
    );
    const indexes: number[] = [];
    for await (const response of client(address).count({ count: 5 })) indexes.push(response.index);
    expect(indexes).toEqual([0, 1, 2, 3, 4]);

    // An empty stream ends at once.
    const none: number[] = [];
    for await (const response of client(address).count({ count: 0 })) none.push(response.index);
    expect(none).toEqual([]);
  });

  it('takes a client stream, and talks both ways on a bidi stream as messages arrive', async () => {
    const { address } = await cleanup.server((server) => server.add(EchoService, { ...streamingEcho, echo: async () => ({}), count: async function* () {} }));
    async function* words() {
      yield { message: 'one' };
      yield { message: 'two' };
    }
    expect((await client(address).collect(words())).message).toBe('one two');
    expect((await client(address).collect(new Pushable<{ message: string }>().endNow())).message).toBe('');

    // Each answer arrives before the next message is sent: a conversation, not a batch.
    const requests = new Pushable<{ message: string }>();
    const answers: string[] = [];
    requests.push({ message: 'ping 0' });
    for await (const answer of client(address).chat(requests)) {
      answers.push(answer.message);
      if (answers.length < 3) requests.push({ message: `ping ${answers.length}` });
      else requests.end();
    }
    expect(answers).toEqual(['ping 0', 'ping 1', 'ping 2']);
  });

  it('aborts the handler signal when the client cancels a unary call', async () => {
    let handlerSignal: AbortSignal | undefined;
    let started!: () => void;
    const startedPromise = new Promise<void>((resolve) => (started = resolve));
    const { address } = await cleanup.server((server) =>
      server.add(EchoService, {
        ...streamingEcho,
        echo: async (_request, context) => {
          handlerSignal = context.signal;
          started();
          await aborted(context.signal);
          return { message: 'too late' };
        },
        count: async function* () {},
      }),
    );
    const controller = new AbortController();
    const call = client(address).echo({ message: 'wait' }, { signal: controller.signal });
    await startedPromise;
    const reason = new Error('caller gave up');
    controller.abort(reason);
    await expect(call).rejects.toBe(reason);
    expect(await aborted(handlerSignal!)).toBeInstanceOf(RpcCancelledError);

    // A signal aborted before the call rejects without calling.
    await expect(client(address).echo({}, { signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
  });

  it('cancels a server stream when the client stops iterating or aborts', async () => {
    const signals: AbortSignal[] = [];
    const finished: string[] = [];
    const { address } = await cleanup.server((server) =>
      server.add(EchoService, {
        ...streamingEcho,
        echo: async () => ({}),
        count: async function* (request, context) {
          signals.push(context.signal);
          try {
            for (let index = 0; index < request.count; index++) {
              await sleep(request.intervalMs, context.signal);
              if (context.signal.aborted) return;
              yield { index };
            }
          } finally {
            finished.push(context.method);
          }
        },
      }),
    );
    const echo = client(address);

    // Breaking out of the loop cancels the call.
    const seen: number[] = [];
    for await (const response of echo.count({ count: 1000, intervalMs: 10 })) {
      seen.push(response.index);
      if (seen.length === 2) break;
    }
    expect(seen).toEqual([0, 1]);
    expect(await aborted(signals[0]!)).toBeInstanceOf(RpcCancelledError);

    // Aborting the signal ends the iteration with the signal's reason.
    const controller = new AbortController();
    const reason = new Error('stop');
    const collected: number[] = [];
    await expect(
      (async () => {
        for await (const response of echo.count({ count: 1000, intervalMs: 10 }, { signal: controller.signal })) {
          collected.push(response.index);
          if (collected.length === 3) controller.abort(reason);
        }
      })(),
    ).rejects.toBe(reason);
    await aborted(signals[1]!);
    // The handler's finally runs after its signal aborted, as its generator unwinds.
    await until('both handlers to finish', () => (finished.length === 2 ? true : undefined));
    expect(finished).toEqual(['/berth.testing.v1.EchoService/Count', '/berth.testing.v1.EchoService/Count']);
  });

  it('applies the deadline to server streams only when asked', async () => {
    const { address } = await cleanup.server((server) =>
      server.add(EchoService, {
        ...streamingEcho,
        echo: async () => ({}),
        count: async function* (request, context) {
          for (let index = 0; index < request.count; index++) {
            await sleep(request.intervalMs, context.signal);
            yield { index };
          }
        },
      }),
    );
    const slow = createRpcClient(EchoService, address, { defaultTimeoutMs: 50 });
    cleanup.add(() => slow.close());
    // The unary default deadline does not apply to streams: 4 × 30 ms outlasts it.
    const all: number[] = [];
    for await (const response of slow.count({ count: 4, intervalMs: 30 })) all.push(response.index);
    expect(all).toEqual([0, 1, 2, 3]);
  });

  it('checks implementations and lifecycle', async () => {
    const server = createRpcServer();
    cleanup.add(() => server.close());
    expect(() =>
      // @ts-expect-error -- `count` is missing
      server.add(EchoService, { ...streamingEcho, echo: async () => ({}) }),
    ).toThrow(RpcConfigurationError);
    server.add(Health, { check: async () => ({}), watch: async function* () {} });
    await server.listen('127.0.0.1', 0);
    await expect(server.listen('127.0.0.1', 0)).rejects.toBeInstanceOf(RpcListenError);
    expect(() => server.add(EchoService, { ...streamingEcho, echo: async () => ({}), count: async function* () {} })).toThrow(RpcConfigurationError);
    await server.close();
    await server.close();

    const busy = createRpcServer();
    const { port } = await busy.listen('127.0.0.1', 0);
    cleanup.add(() => busy.close());
    const second = createRpcServer();
    await expect(second.listen('127.0.0.1', port)).rejects.toBeInstanceOf(RpcListenError);
    await second.close();
  });

  it('close() cancels calls still running after the shutdown timeout', async () => {
    let handlerSignal: AbortSignal | undefined;
    const server = createRpcServer({ shutdownTimeoutMs: 100 });
    server.add(EchoService, {
      ...streamingEcho,
      echo: async () => ({}),
      count: async function* (_request, context) {
        handlerSignal = context.signal;
        yield { index: 0 };
        await aborted(context.signal);
      },
    });
    const { address } = await server.listen('0.0.0.0', 0);
    expect(address).toMatch(/^127\.0\.0\.1:\d+$/);
    const stream = client(address).count({ count: 1 })[Symbol.asyncIterator]();
    expect((await stream.next()).value?.index).toBe(0);
    // The handler waits for its cancellation: close() returns only because it cancelled the call.
    await server.close();
    expect(await aborted(handlerSignal!)).toBeInstanceOf(RpcCancelledError);
    await expect(stream.next()).rejects.toThrow();
  });
});
