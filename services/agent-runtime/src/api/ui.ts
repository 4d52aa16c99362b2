/**
 * Generative UI routes (`ui` of langgraph.json), as the SDK's `client["~ui"].getComponent` and
 * `LoadExternalComponent` use them:
 * - `POST /ui/{assistant_id}` `{name}` → the HTML that loads a component: `<link>`s of the bundle's
 *   CSS and a `<script>` whose onload renders component `name` into the SDK's shadow root;
 * - `GET /ui/{ui_name}/{file}` → the bundle's files (public: a `<script src>` sends no credentials).
 * `assistant_id` is a `ui` name, or a graph id or assistant id whose graph has a `ui` entry.
 */
import { NotFoundError } from '@berth/errors';
import { isUuid } from '@berth/ids';
import { z } from 'zod';
import type { RequestAuth } from '../auth/index.js';
import { uiGlobalName, type UiAsset } from '../project/ui-bundle.js';
import type { ServerContext } from './context.js';
import type { AgentApi } from './access.js';

export function uiRoutes(api: AgentApi, ctx: ServerContext, bundles: ReadonlyMap<string, UiAsset[]>): void {
  /** The `ui` name of an assistant reference, after the caller's read permission on the assistant. */
  const uiName = async (auth: RequestAuth, ref: string): Promise<string> => {
    if (bundles.has(ref)) return ref;
    if (isUuid(ref)) {
      const { filter } = await ctx.authz.authorize(auth, 'assistants:read', { assistant_id: ref });
      const assistant = await ctx.resolveAssistant(ref, filter);
      if (bundles.has(assistant.graph_id)) return assistant.graph_id;
    }
    throw new NotFoundError(`No UI for assistant ${ref}: langgraph.json "ui" names ${[...bundles.keys()].join(', ') || 'nothing'}`);
  };

  api
    .route({
      method: 'post',
      path: '/ui/{assistant_id}',
      access: ['custom_auth'],
      summary: "The HTML that loads one of a graph's UI components",
      tags: ['ui'],
      params: z.strictObject({ assistant_id: z.string().min(1) }),
      body: z.strictObject({ name: z.string().min(1) }),
      status: 200,
      description: '`<link>` tags of the CSS and a `<script>` tag.',
      produces: ['text/html'],
      errors: [404],
      handler: async ({ params, body, auth, req, res }) => {
        const name = await uiName(auth, params.assistant_id);
        const files = bundles.get(name)!;
        const host = req.get('host') ?? '';
        // A page on another origin loads these: local servers are plain http, anything else keeps the page's scheme.
        const hostname = host.replace(/:\d+$/, '');
        const base = `${hostname === 'localhost' || hostname === '127.0.0.1' ? 'http:' : ''}//${host}/ui/${encodeURIComponent(name)}`;
        const tags = files.filter((f) => f.basename.endsWith('.css')).map((f) => `<link rel="stylesheet" href="${base}/${f.basename}" />`);
        const script = files.find((f) => f.basename.endsWith('.js'));
        if (script) {
          tags.push(
            `<script src="${base}/${script.basename}" onload='${uiGlobalName(name)}.render(${htmlAttr(JSON.stringify(body.name))}, "{{shadowRootId}}")'></script>`,
          );
        }
        res.status(200).type('text/html').send(tags.join('\n'));
      },
    })
    .route({
      method: 'get',
      path: '/ui/{ui_name}/{file}',
      access: ['deployment_credential'],
      summary: 'A file of a UI bundle',
      tags: ['ui'],
      params: z.strictObject({ ui_name: z.string().min(1), file: z.string().min(1) }),
      status: 200,
      description: 'The file.',
      produces: ['application/javascript', 'text/css'],
      errors: [404],
      handler: ({ params, res }) => {
        const file = bundles.get(params.ui_name)?.find((f) => f.basename === params.file);
        if (!file) throw new NotFoundError(`UI file ${params.ui_name}/${params.file} not found`);
        res.status(200).type(file.contentType).send(Buffer.from(file.contents));
      },
    });
}

/** A JSON string placed in a single-quoted attribute: its quotes and markup characters escaped. */
function htmlAttr(json: string): string {
  return json.replace(/&/g, '&amp;').replace(/'/g, '&#39;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}
