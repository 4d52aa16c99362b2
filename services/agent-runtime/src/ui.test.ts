/**
 * Generative UI (`ui` of langgraph.json): components bundled with esbuild at start, loaded the
 * way the SDK's `LoadExternalComponent` does (`client["~ui"].getComponent`, then the script).
 * Agent server in a child process on the `http` fixture, real Postgres.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Client } from '@langchain/langgraph-sdk';
import { silentLogger } from '@berth/log';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { runInNewContext } from 'node:vm';
import { UiBundleError } from './project/ui-bundle.js';
import { startAgentServer } from './index.js';
import { spawnAgentServer } from './__tests__/fixtures.js';

const fixture = (name: string) => fileURLToPath(new URL(`../test-projects/http/${name}`, import.meta.url));
let db: TestDatabase;
let child: ChildProcess;
let url: string;
let client: Client;

beforeAll(async () => {
  db = await createTestDatabase('agent');
  ({ child, url } = await spawnAgentServer(db.url, { workers: 1, config: { configPath: fixture('langgraph.json') } }));
  client = new Client({ apiUrl: url });
}, 60_000);
afterAll(async () => {
  child?.kill();
  await db?.drop();
});

type Element = { type: unknown; props: Record<string, unknown> };

/**
 * Runs a bundle as a page that bootstrapped the SDK's UI context would, with a stand-in React
 * whose elements are plain objects, and renders `component` with `props`.
 */
function renderInPage(script: string, globalName: string, component: string, props: Record<string, unknown>): { rendered: Element; required: string[] } {
  const required: string[] = [];
  const element = (type: unknown, p: Record<string, unknown>) => ({ type, props: p });
  const modules: Record<string, unknown> = {
    'react/jsx-runtime': { jsx: element, jsxs: element, Fragment: 'Fragment' },
    react: { useState: (v: unknown) => [v, () => undefined] },
  };
  let responded: { comp: (p: Record<string, unknown>) => Element; target: unknown } | undefined;
  const appended: unknown[] = [];
  const page: Record<string | symbol, unknown> = {
    document: {
      getElementById: (id: string) => (id === 'root-1' ? { shadowRoot: { appendChild: (el: unknown) => appended.push(el) } } : null),
      createElement: (tag: string) => ({ tag }),
    },
  };
  page[Symbol.for('LGUI_REQUIRE')] = (name: string) => {
    required.push(name);
    if (!(name in modules)) throw new Error(`unknown module ${name}`);
    return modules[name];
  };
  page[Symbol.for('LGUI_EXT_STORE')] = {
    respond: (_id: string, comp: (p: Record<string, unknown>) => Element, target: unknown) => (responded = { comp, target }),
  };
  page.globalThis = page;
  runInNewContext(`${script}\n${globalName}.render(${JSON.stringify(component)}, "root-1");`, page);
  if (!responded) throw new Error('render did not hand a component to the store');
  expect(appended).toEqual([responded.target]);
  return { rendered: responded.comp(props), required };
}

describe('POST /ui/{assistant_id}', () => {
  it('answers the script tag that renders the component, at the host the client used', async () => {
    const html = await client['~ui'].getComponent('echo', 'card');
    expect(html).toBe(`<script src="${url}/ui/echo/entrypoint.js" onload='__LGUI_echo.render("card", "{{shadowRootId}}")'></script>`);
  });

  it("finds the UI of an assistant's graph by assistant id", async () => {
    const assistant = await client.assistants.create({ graphId: 'echo' });
    expect(await client['~ui'].getComponent(assistant.assistant_id, 'card')).toContain(`src="${url}/ui/echo/entrypoint.js"`);
  });

  it('links the stylesheet of a UI that imports CSS, under a global name made of the UI name', async () => {
    const html = await client['~ui'].getComponent('shop-cart', 'cart');
    expect(html.split('\n')).toEqual([
      `<link rel="stylesheet" href="${url}/ui/shop-cart/entrypoint.css" />`,
      `<script src="${url}/ui/shop-cart/entrypoint.js" onload='__LGUI_shop_cart.render("cart", "{{shadowRootId}}")'></script>`,
    ]);
    const css = await fetch(`${url}/ui/shop-cart/entrypoint.css`);
    expect(css.headers.get('content-type')).toMatch(/^text\/css/);
    expect(await css.text()).toContain('color: teal');
  });

  it('answers 404 with a detail for an unknown UI or assistant, 422 without a name', async () => {
    await expect(client['~ui'].getComponent('nope', 'card')).rejects.toThrow(/404/);
    const unknown = await fetch(`${url}/ui/00000000-0000-4000-8000-000000000000`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"name":"card"}',
    });
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { detail: string }).detail).toMatch(/not found/i);
    const bad = await fetch(`${url}/ui/echo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(bad.status).toBe(422);
  });
});

describe('GET /ui/{ui_name}/{file}', () => {
  it("serves a bundle that takes React from the page and renders the project's component", async () => {
    const res = await fetch(`${url}/ui/echo/entrypoint.js`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/javascript/);
    const script = await res.text();
    expect(script).toContain('globalThis[Symbol.for("LGUI_REQUIRE")]');

    const { rendered, required } = renderInPage(script, '__LGUI_echo', 'card', { text: 'hello' });
    expect(rendered).toEqual({ type: 'div', props: { className: 'card', children: ['Echoed: ', 'hello'] } });
    expect(required).toEqual(['react/jsx-runtime']);

    const cart = renderInPage(await (await fetch(`${url}/ui/shop-cart/entrypoint.js`)).text(), '__LGUI_shop_cart', 'cart', { items: ['pear'] });
    expect(cart.rendered).toMatchObject({ type: 'ul', props: { className: 'cart', children: [{ type: 'li', props: { children: 'pear' } }] } });
    expect(cart.required.sort()).toEqual(['react', 'react/jsx-runtime']);
  });

  it('answers 404 with a detail for an unknown file', async () => {
    for (const path of ['/ui/echo/other.js', '/ui/nope/entrypoint.js']) {
      const res = await fetch(`${url}${path}`);
      expect(res.status).toBe(404);
      expect(((await res.json()) as { detail: string }).detail).toMatch(/not found/);
    }
  });
});

describe('a UI that does not build', () => {
  it('stops the server at start with the bundling error', async () => {
    const start = () =>
      startAgentServer({ configPath: fixture('langgraph.bad-ui.json'), databaseUrl: db.url, host: '127.0.0.1', port: 0, workers: 0 }, silentLogger());
    await expect(start()).rejects.toThrow(UiBundleError);
    await expect(start()).rejects.toThrow(/ui "echo": cannot bundle .*broken\.tsx/);
  });
});
