/** The routing cache on a clock the test moves: exact expiry instants, no waiting. */
import { describe, expect, it } from '@jest/globals';
import { ManualClock } from '@berth/clock';
import { NotFoundError } from '@berth/errors';
import { DeploymentStatus } from '@berth/proto';
import { DeploymentResolver, type ResolvedDeployment } from './resolver.js';

/** A control plane that knows `routes` (upstream URL by deployment id) and counts its calls. */
function controlPlane(routes: Map<string, string>) {
  const calls: string[] = [];
  const resolve = async (deploymentId: string): Promise<ResolvedDeployment> => {
    calls.push(deploymentId);
    const upstreamUrl = routes.get(deploymentId);
    if (upstreamUrl === undefined) throw new NotFoundError(`deployment ${deploymentId} not found`);
    return {
      tenantId: 't',
      upstreamUrl,
      customAuth: false,
      upstreamCredential: '',
      status: DeploymentStatus.READY,
      statusMessage: '',
      tracingCredential: '',
      name: deploymentId,
      sessionId: '',
    };
  };
  return { calls, resolve };
}

describe('DeploymentResolver', () => {
  it('reuses an answer until the instant its ttl ends, then asks again and sees the redeploy', async () => {
    const clock = new ManualClock();
    const routes = new Map([['d1', 'http://a']]);
    const cp = controlPlane(routes);
    const resolver = new DeploymentResolver(cp.resolve, { ttlMs: 1000, clock });
    expect((await resolver.resolve('d1'))?.upstreamUrl).toBe('http://a');
    routes.set('d1', 'http://b');
    await clock.advance(999);
    expect((await resolver.resolve('d1'))?.upstreamUrl).toBe('http://a');
    expect(cp.calls).toHaveLength(1);
    await clock.advance(1);
    expect((await resolver.resolve('d1'))?.upstreamUrl).toBe('http://b');
    expect(cp.calls).toHaveLength(2);
  });

  it('remembers "not found" for the same time, so a deleted deployment stays gone and a new one appears after it', async () => {
    const clock = new ManualClock();
    const routes = new Map([['d1', 'http://a']]);
    const cp = controlPlane(routes);
    const resolver = new DeploymentResolver(cp.resolve, { ttlMs: 1000, clock });
    await resolver.resolve('d1');
    routes.delete('d1');
    await clock.advance(1000);
    expect(await resolver.resolve('d1')).toBeUndefined();
    routes.set('d1', 'http://c');
    await clock.advance(999);
    expect(await resolver.resolve('d1')).toBeUndefined();
    await clock.advance(1);
    expect((await resolver.resolve('d1'))?.upstreamUrl).toBe('http://c');
    expect(cp.calls).toEqual(['d1', 'd1', 'd1']);
  });

  it('drops expired answers first, then the oldest, when it holds maxEntries', async () => {
    const clock = new ManualClock();
    const routes = new Map(['d1', 'd2', 'd3', 'd4'].map((id) => [id, `http://${id}`]));
    const cp = controlPlane(routes);
    const resolver = new DeploymentResolver(cp.resolve, { ttlMs: 1000, maxEntries: 2, clock });
    await resolver.resolve('d1');
    await clock.advance(500);
    await resolver.resolve('d2');
    await clock.advance(500); // d1 expired, d2 live
    await resolver.resolve('d3'); // evicts d1 (expired)
    await resolver.resolve('d2');
    expect(cp.calls).toEqual(['d1', 'd2', 'd3']);
    await resolver.resolve('d4'); // full of live answers: evicts the oldest, d2
    await resolver.resolve('d3');
    await resolver.resolve('d2');
    expect(cp.calls).toEqual(['d1', 'd2', 'd3', 'd4', 'd2']);
  });

  it('asks once for concurrent misses of one id, while the answer is on its way; a failure reaches every waiter and is not kept', async () => {
    const cp = controlPlane(new Map([['d1', 'http://a']]));
    // The control plane answers only when the test says so.
    const held: (() => void)[] = [];
    const answer = () => held.splice(0).forEach((release) => release());
    let failing = false;
    const slow = async (id: string) => {
      await new Promise<void>((resolve) => held.push(resolve));
      if (failing) throw new Error('control plane unavailable');
      return cp.resolve(id);
    };
    const resolver = new DeploymentResolver(slow, { clock: new ManualClock() });
    // Every lookup starts while the first is held: none of them has an answer to reuse.
    const waiting = Array.from({ length: 25 }, () => resolver.resolve('d1'));
    answer();
    expect((await Promise.all(waiting)).map((r) => r?.upstreamUrl)).toEqual(Array(25).fill('http://a'));
    expect(cp.calls).toEqual(['d1']);

    resolver.clear();
    failing = true;
    const failed = Array.from({ length: 3 }, () => resolver.resolve('d1'));
    answer();
    for (const lookup of failed) await expect(lookup).rejects.toThrow('control plane unavailable');
    failing = false;
    const again = resolver.resolve('d1');
    answer();
    expect((await again)?.upstreamUrl).toBe('http://a');
    expect(cp.calls).toEqual(['d1', 'd1']);
  });
});
