// A page for browser.test.ts (browser code: typechecked by tsconfig.pages.json): it calls a server on another origin and shows what it got.
const target = new URLSearchParams(location.search).get('target')!;
const res = await fetch(target, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"a":1}' });
document.getElementById('root')!.textContent = `${res.status} ${await res.text()}`;
