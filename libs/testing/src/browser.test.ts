import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import type { Browser } from 'playwright-core';
import { launchChromium, servePage, type ServedPage } from './browser.js';

describe('launchChromium and servePage', () => {
  let browser: Browser;
  let page: ServedPage;
  beforeAll(async () => {
    browser = await launchChromium();
    page = await servePage({ entry: fileURLToPath(new URL('./__tests__/fetch.page.ts', import.meta.url)) });
  });
  afterAll(async () => {
    await browser?.close();
    await page?.close();
  });

  it('runs a bundled page on its own origin, whose cross-origin call the browser subjects to CORS', async () => {
    const seen: string[] = [];
    const server = createServer((req, res) => {
      seen.push(`${req.method} ${req.headers.origin}`);
      // Answers the preflight and the call only for the page's origin.
      res.setHeader('access-control-allow-origin', page.origin);
      res.setHeader('access-control-allow-headers', 'content-type');
      res.writeHead(req.method === 'OPTIONS' ? 204 : 200).end(req.method === 'OPTIONS' ? undefined : 'hello');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const tab = await browser.newPage();
      await tab.goto(`${page.url}?target=${encodeURIComponent(`http://127.0.0.1:${(server.address() as AddressInfo).port}/x`)}`);
      await tab.waitForSelector('#root:not(:empty)');
      expect(await tab.textContent('#root')).toBe('200 hello');
      expect(seen).toEqual([`OPTIONS ${page.origin}`, `POST ${page.origin}`]);
    } finally {
      server.close();
    }
  });
});
