import { describe, expect, it } from '@jest/globals';
import { RouteTable } from './route-table.js';

function table() {
  const t = new RouteTable<string>();
  t.add('GET', '/threads/{thread_id}', 'get thread');
  t.add('PATCH', '/threads/{thread_id}', 'patch thread');
  t.add('POST', '/threads/search', 'search threads');
  t.add('POST', '/threads/{thread_id}/runs/wait', 'wait');
  t.add('GET', '/ok', 'ok');
  return t;
}

describe('RouteTable', () => {
  it('finds the route of a method and path, with its decoded parameters', () => {
    expect(table().match('POST', '/threads/a%20b/runs/wait')).toEqual({ kind: 'found', value: 'wait', params: { thread_id: 'a b' } });
    expect(table().match('GET', '/ok')).toEqual({ kind: 'found', value: 'ok', params: {} });
  });

  it('matches like express: literals ignore case, a trailing slash is ignored, HEAD uses GET', () => {
    expect(table().match('POST', '/Threads/T1/RUNS/wait/')).toMatchObject({ kind: 'found', value: 'wait', params: { thread_id: 'T1' } });
    expect(table().match('HEAD', '/threads/t1')).toMatchObject({ kind: 'found', value: 'get thread' });
  });

  it('takes the first template registered when several match', () => {
    // `/threads/search` is also a `{thread_id}`: POST only exists on the literal, GET on the parameter.
    expect(table().match('POST', '/threads/search')).toMatchObject({ kind: 'found', value: 'search threads' });
    expect(table().match('GET', '/threads/search')).toMatchObject({ kind: 'found', value: 'get thread', params: { thread_id: 'search' } });
  });

  it('names the allowed methods of a known path with another method', () => {
    expect(table().match('DELETE', '/threads/t1')).toEqual({ kind: 'method', allow: ['GET', 'PATCH'] });
    expect(table().match('PUT', '/ok')).toEqual({ kind: 'method', allow: ['GET'] });
  });

  it('finds nothing for unknown paths, empty parameters and malformed escapes', () => {
    expect(table().match('GET', '/nowhere')).toEqual({ kind: 'none' });
    expect(table().match('GET', '/threads/t1/extra')).toEqual({ kind: 'none' });
    expect(table().match('POST', '/threads//runs/wait')).toEqual({ kind: 'none' });
    expect(table().match('GET', '/threads/%E0%A4%A')).toEqual({ kind: 'none' });
  });
});
