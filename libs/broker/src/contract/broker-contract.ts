/**
 * THE behavioural contract of an event broker: every adapter must pass it, through the
 * `EventBroker` port only. Each backend's test file calls {@link describeBrokerContract} with a
 * factory of brokers on an isolated namespace of a real server. The cases about several
 * processes, control messages, volume and lifecycle are in `scale-cases.ts` and
 * `lifecycle-cases.ts`.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { InvalidArgumentError } from '@berth/errors';
import { EventTooLargeError, InvalidEventDataError, RunEndedError } from '../errors.js';
import { drain, Harness, ids, newRunId, nextWithin, waitingForWakeUp, type BrokerContractTarget } from './harness.js';
import { lifecycleCases } from './lifecycle-cases.js';
import { scaleCases } from './scale-cases.js';

export type { BrokerContractTarget } from './harness.js';

/** JSON values of every kind, including text that trips naive storage (U+0000, astral characters). */
const SAMPLES: unknown[] = [
  { text: 'hello', nested: { list: [1, 'two', null, true, { deep: [] }] }, 'key with "quotes"': 'v' },
  [1, 2.5, -3, 'x', null],
  'a plain string',
  null,
  42,
  false,
  'U+0000 \u0000, backslash \\, newline \n, emoji 😀, CJK 漢字',
  { empty: {}, emptyList: [], emptyText: '' },
];

/** Registers the broker contract tests for the backend that `setup` provides. */
export function describeBrokerContract(label: string, setup: () => Promise<BrokerContractTarget>): void {
  describe(`event broker contract: ${label}`, () => {
    let target: BrokerContractTarget | undefined;
    let h: Harness;

    beforeAll(async () => {
      target = await setup();
      // Create the storage once, outside any test's timing.
      const broker = target.create();
      await broker.ready();
      await broker.close();
    });
    afterAll(async () => {
      await target?.teardown?.();
    });
    beforeEach(() => {
      if (!target) throw new Error('broker contract setup failed');
      h = new Harness(target);
    });
    afterEach(async () => {
      await h.close();
    });

    it('delivers events in order with gap-free ids from "0", JSON intact', async () => {
      const broker = h.broker();
      const run = newRunId();
      const sub = broker.subscribe(run, { from: 'start' });
      await sub.ready;
      const published: string[] = [];
      for (const data of SAMPLES) published.push(await broker.publish(run, 'values', data));
      published.push(
        ...(await broker.publishMany(run, [
          { event: 'a', data: 1 },
          { event: 'b', data: { two: 2 } },
        ])),
      );
      expect(await broker.publishMany(run, [])).toEqual([]);
      await broker.end(run);

      expect(published).toEqual(ids(SAMPLES.length + 2));
      const events = await drain(sub);
      expect(events).toEqual([
        ...SAMPLES.map((data, k) => ({ id: String(k), event: 'values', data })),
        { id: String(SAMPLES.length), event: 'a', data: 1 },
        { id: String(SAMPLES.length + 1), event: 'b', data: { two: 2 } },
      ]);
    });

    it('gives several subscribers the same sequence', async () => {
      const broker = h.broker();
      const run = newRunId();
      const subs = [broker.subscribe(run, { from: 'start' }), broker.subscribe(run, { from: 'start' }), broker.subscribe(run, { from: 'now' })];
      await Promise.all(subs.map((s) => s.ready));
      const reading = subs.map((s) => drain(s));
      for (let k = 0; k < 30; k++) {
        if (k % 10 === 0)
          await broker.publishMany(run, [
            { event: 'batch', data: k },
            { event: 'batch', data: k + 0.5 },
          ]);
        else await broker.publish(run, 'tick', { k });
      }
      await broker.end(run);
      const [first, ...others] = await Promise.all(reading);
      expect(first!.map((e) => e.id)).toEqual(ids(33));
      for (const other of others) expect(other).toEqual(first);
    });

    it("replays everything with 'start' after the stream ended, and reports the end", async () => {
      const broker = h.broker();
      const run = newRunId();
      for (let k = 0; k < 5; k++) await broker.publish(run, 'values', { k });
      expect(await broker.isEnded(run)).toBe(false);
      await broker.end(run);
      await broker.end(run); // idempotent
      expect(await broker.isEnded(run)).toBe(true);
      expect(await broker.isEnded(newRunId())).toBe(false);
      await expect(broker.publish(run, 'values', 'late')).rejects.toBeInstanceOf(RunEndedError);

      const events = await drain(broker.subscribe(run, { from: 'start' }));
      expect(events).toEqual(ids(5).map((id, k) => ({ id, event: 'values', data: { k } })));
      // Ending a run nobody published to gives an empty, ended stream.
      const empty = newRunId();
      await broker.end(empty);
      expect(await drain(broker.subscribe(empty, { from: 'start' }))).toEqual([]);
    });

    it("skips earlier events with 'now'", async () => {
      const broker = h.broker();
      const run = newRunId();
      for (let k = 0; k < 3; k++) await broker.publish(run, 'before', k);
      const sub = broker.subscribe(run, { from: 'now' });
      await sub.ready;
      await broker.publish(run, 'after', 3);
      await broker.publish(run, 'after', 4);
      await broker.end(run);
      expect(await drain(sub)).toEqual([
        { id: '3', event: 'after', data: 3 },
        { id: '4', event: 'after', data: 4 },
      ]);
      // 'now' on an ended stream ends at once, with nothing.
      expect(await drain(broker.subscribe(run, { from: 'now' }), { stepMs: 1_000 })).toEqual([]);
    });

    it('resumes a reconnecting client with { after: Last-Event-ID }: exactly the missed events', async () => {
      const broker = h.broker();
      const run = newRunId();
      const first = broker.subscribe(run, { from: 'start' });
      await first.ready;
      for (let k = 0; k < 4; k++) await broker.publish(run, 'values', k);
      const seen = await drain(first, { max: 4 });
      await first.return(); // the client disconnects
      for (let k = 4; k < 10; k++) await broker.publish(run, 'values', k);

      const lastEventId = seen.at(-1)!.id;
      expect(lastEventId).toBe('3');
      const resumed = broker.subscribe(run, { from: { after: lastEventId } });
      await resumed.ready;
      await broker.publish(run, 'values', 10); // live again
      await broker.end(run);
      const rest = await drain(resumed);
      expect(rest.map((e) => e.id)).toEqual(ids(7, 4));
      expect(rest.map((e) => e.data)).toEqual([4, 5, 6, 7, 8, 9, 10]);
      expect(await drain(broker.subscribe(run, { from: { after: '10' } }))).toEqual([]);
      expect(await drain(broker.subscribe(run, { from: { after: '8' } }))).toMatchObject([{ id: '9' }, { id: '10' }]);
    });

    it('ends a live subscriber after it drained every event published before the end', async () => {
      const broker = h.broker();
      const run = newRunId();
      const sub = broker.subscribe(run, { from: 'start' });
      await sub.ready;
      const reading = drain(sub);
      for (let k = 0; k < 50; k++) await broker.publish(run, 'values', k);
      await broker.end(run);
      // The end's wake-up ends it: the harness's clock holds the safety re-read back.
      const events = await reading;
      expect(events.map((e) => e.data)).toEqual(Array.from({ length: 50 }, (_, k) => k));
    });

    it('stops a subscription promptly when its signal aborts', async () => {
      const broker = h.broker();
      const run = newRunId();
      const controller = new AbortController();
      const sub = broker.subscribe(run, { from: 'start', signal: controller.signal });
      await sub.ready;
      await broker.publish(run, 'values', 'one');
      expect(await nextWithin(sub, 2_000)).toEqual({ done: false, value: { id: '0', event: 'values', data: 'one' } });
      const waiting = sub.next(); // nothing more is coming
      await waitingForWakeUp(h.clock);
      // Only the abort can end it: no event comes and the clock holds the safety re-read back.
      controller.abort();
      expect(await waiting).toEqual({ done: true, value: undefined });
      expect(await sub.next()).toEqual({ done: true, value: undefined });

      // An already aborted signal: nothing, at once.
      expect(await drain(broker.subscribe(run, { from: 'start', signal: AbortSignal.abort() }), { stepMs: 500 })).toEqual([]);
      // Breaking out of for-await releases the subscription too.
      const loop = broker.subscribe(run, { from: 'start' });
      for await (const event of loop) {
        expect(event.id).toBe('0');
        break;
      }
      expect(await loop.next()).toEqual({ done: true, value: undefined });
    });

    it('round-trips an event larger than 1 MB, live and replayed', async () => {
      const broker = h.broker();
      const run = newRunId();
      const chunk = 'large payload ✓ "quoted" \\ '.repeat(64);
      const big = { blob: chunk.repeat(Math.ceil(1_100_000 / chunk.length)), rows: Array.from({ length: 2_000 }, (_, k) => ({ k, v: `row ${k}` })) };
      expect(Buffer.byteLength(JSON.stringify(big))).toBeGreaterThan(1_048_576);
      const sub = broker.subscribe(run, { from: 'start' });
      await sub.ready;
      await broker.publish(run, 'small', 1);
      await broker.publish(run, 'big', big);
      await broker.publish(run, 'small', 2);
      await broker.end(run);
      const expected = [
        { id: '0', event: 'small', data: 1 },
        { id: '1', event: 'big', data: big },
        { id: '2', event: 'small', data: 2 },
      ];
      expect(await drain(sub)).toEqual(expected);
      expect(await drain(broker.subscribe(run, { from: 'start' }))).toEqual(expected);
    });

    it('rejects what it cannot store, without appending anything', async () => {
      const broker = h.broker({ maxEventBytes: 4_096 });
      const run = newRunId();
      const circular: Record<string, unknown> = {};
      circular.self = circular;
      await expect(broker.publish(run, 'values', undefined)).rejects.toBeInstanceOf(InvalidEventDataError);
      await expect(broker.publish(run, 'values', () => 1)).rejects.toBeInstanceOf(InvalidEventDataError);
      await expect(broker.publish(run, 'values', 10n)).rejects.toBeInstanceOf(InvalidEventDataError);
      await expect(broker.publish(run, 'values', circular)).rejects.toBeInstanceOf(InvalidEventDataError);
      await expect(broker.publish(run, 'values', 'x'.repeat(5_000))).rejects.toBeInstanceOf(EventTooLargeError);
      await expect(
        broker.publishMany(run, [
          { event: 'ok', data: 1 },
          { event: 'bad', data: undefined },
        ]),
      ).rejects.toBeInstanceOf(InvalidEventDataError);
      await expect(broker.publish('', 'values', 1)).rejects.toBeInstanceOf(InvalidArgumentError);
      await expect(broker.publish(run, '', 1)).rejects.toBeInstanceOf(InvalidArgumentError);
      for (const after of ['abc', '-1', '01', '1.5', '']) {
        expect(() => broker.subscribe(run, { from: { after } })).toThrow(InvalidArgumentError);
      }
      expect(await broker.publish(run, 'values', 'first real event')).toBe('0');
    });

    scaleCases(() => h);
    lifecycleCases(() => h);
  });
}
