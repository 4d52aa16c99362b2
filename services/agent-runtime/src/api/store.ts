/**
 * /store — the long-term store graphs share with clients: items by namespace and key, searches
 * (namespace prefix, value filters, semantic `query`), namespace listing.
 *
 * Authorization events (custom auth): `store:put`, `store:get`, `store:delete`, `store:search`,
 * `store:list_namespaces`, with the SDK's value shapes. A handler may edit `value.namespace`
 * (e.g. prefix it with the user's identity): the edited namespace is the one used. Store handlers
 * allow or refuse; a filter they return is refused as a handler error (it has no meaning here).
 */
import { RequestValidationError, type ValidationIssue } from '@berth/errors';
import { z } from 'zod';
import { AuthHandlerError, type AuthEvent, type RequestAuth } from '../auth/index.js';
import type { JsonObject } from '../storage/sql.js';
import { filterProblems } from '../storage/store-query.js';
import type { NamespaceMatch } from '../storage/store-query.js';
import type { StoreItem } from '../storage/store.js';
import type { ServerContext } from './context.js';
import { Flag, JsonObject as JsonObjectSchema, Timestamp, iso } from './schemas.js';
import type { AgentApi } from './access.js';

/** GET joins a namespace with dots, so a label cannot hold one. */
const Label = z
  .string()
  .min(1)
  .refine((label) => !label.includes('.'), { message: "Namespace labels cannot contain periods ('.')" });
const Namespace = z.array(Label);

const ItemPut = z.strictObject({
  namespace: Namespace.min(1),
  key: z.string().min(1),
  value: JsonObjectSchema,
  /** null: the configured fields; false: not embedded; a list: these fields. */
  index: z
    .union([z.literal(false), z.array(z.string().min(1))])
    .nullable()
    .optional(),
  /** Minutes; null: never expires. */
  ttl: z.number().positive().nullable().optional(),
});
const ItemDelete = z.strictObject({ namespace: Namespace, key: z.string().min(1) });
const ItemQuery = z.strictObject({
  /** The namespace labels joined with dots. */
  namespace: z.string(),
  key: z.string().min(1),
  refresh_ttl: Flag.optional(),
});
const ItemSearch = z.strictObject({
  namespace_prefix: Namespace.nullable().optional(),
  /** Conditions on top-level value fields: `{f: v}` (equality) or `{f: {$eq|$ne|$gt|$gte|$lt|$lte: v}}`. */
  filter: JsonObjectSchema.nullable().optional(),
  limit: z.number().int().min(1).max(1000).default(10),
  offset: z.number().int().min(0).default(0),
  /** Semantic search; needs store.index in langgraph.json. */
  query: z.string().nullable().optional(),
  refresh_ttl: z.boolean().nullable().optional(),
});
/** Labels to match; `*` matches any one label. */
const MatchPath = z.array(z.string().min(1));
const NamespaceList = z.strictObject({
  prefix: MatchPath.nullable().optional(),
  suffix: MatchPath.nullable().optional(),
  max_depth: z.number().int().min(1).nullable().optional(),
  limit: z.number().int().min(1).max(1000).default(100),
  offset: z.number().int().min(0).default(0),
});

const Item = z
  .strictObject({ namespace: z.array(z.string()), key: z.string(), value: JsonObjectSchema, created_at: Timestamp, updated_at: Timestamp })
  .meta({ id: 'Item' });
const SearchItem = Item.extend({ score: z.number().nullable() }).meta({ id: 'SearchItem' });

const itemJson = (item: StoreItem) => ({
  namespace: item.namespace,
  key: item.key,
  value: item.value,
  created_at: iso(item.created_at),
  updated_at: iso(item.updated_at),
});

/** The namespace a handler may have edited: still a list of labels the store accepts. */
function namespaceOf(event: AuthEvent, namespace: unknown): string[] {
  if (!Namespace.safeParse(namespace).success) {
    throw new AuthHandlerError(event, `set value.namespace to ${JSON.stringify(namespace)}; it must be a list of non-empty labels without periods`);
  }
  return namespace as string[];
}

export function storeRoutes(api: AgentApi, ctx: ServerContext): void {
  const tags = ['store'];
  const { store } = ctx;

  /** Runs the event's handler; returns its (possibly edited) value. */
  const authorized = async <T extends object>(auth: RequestAuth, event: AuthEvent, value: T): Promise<T> => {
    const { filter, value: edited } = await ctx.authz.authorize(auth, event, value);
    if (filter) throw new AuthHandlerError(event, 'returned a filter; store handlers allow (nothing or true), refuse (false) or edit value.namespace');
    return edited;
  };
  const refuseQuery = () => {
    throw new RequestValidationError([
      {
        loc: ['body', 'query'],
        msg: 'Semantic search is not configured: add store.index {embed, dims} to langgraph.json to search with a query',
        type: 'value_error',
      },
    ]);
  };

  api
    .route({
      method: 'put',
      path: '/store/items',
      access: ['custom_auth'],
      summary: 'Store or replace an item',
      tags,
      body: ItemPut,
      handler: async ({ body, auth }) => {
        if (Array.isArray(body.index) && !store.semanticSearch) {
          throw new RequestValidationError([
            { loc: ['body', 'index'], msg: 'Index fields need semantic search: add store.index {embed, dims} to langgraph.json', type: 'value_error' },
          ]);
        }
        const value = await authorized(auth, 'store:put', { namespace: body.namespace, key: body.key, value: body.value });
        await store.putItem({
          namespace: namespaceOf('store:put', value.namespace),
          key: body.key,
          value: body.value as JsonObject,
          ...(body.index !== undefined ? { index: body.index } : {}),
          ...(body.ttl !== undefined ? { ttl: body.ttl } : {}),
        });
      },
    })
    .route({
      method: 'get',
      path: '/store/items',
      access: ['custom_auth'],
      summary: 'Get an item (null when missing or expired)',
      tags,
      query: ItemQuery,
      // null, not 404: the SDKs' getItem returns null for a missing item (a 404 would throw).
      response: Item.nullable(),
      handler: async ({ query, auth }) => {
        const requested = query.namespace === '' ? [] : query.namespace.split('.');
        const value = await authorized(auth, 'store:get', { namespace: requested, key: query.key });
        const item = await store.getItem(namespaceOf('store:get', value.namespace), query.key, { refreshTtl: query.refresh_ttl });
        return item ? itemJson(item) : null;
      },
    })
    .route({
      method: 'delete',
      path: '/store/items',
      access: ['custom_auth'],
      summary: 'Delete an item',
      tags,
      body: ItemDelete,
      handler: async ({ body, auth }) => {
        const value = await authorized(auth, 'store:delete', { namespace: body.namespace, key: body.key });
        await store.deleteItem(namespaceOf('store:delete', value.namespace), body.key);
      },
    })
    .route({
      method: 'post',
      path: '/store/items/search',
      access: ['custom_auth'],
      summary: 'Search items under a namespace prefix',
      tags,
      body: ItemSearch,
      response: z.strictObject({ items: z.array(SearchItem) }),
      handler: async ({ body, auth }) => {
        const filter = body.filter ?? undefined;
        const problems: ValidationIssue[] = filterProblems(filter ?? {}).map((p) => ({ loc: ['body', 'filter', ...p.path], msg: p.msg, type: 'value_error' }));
        if (problems.length) throw new RequestValidationError(problems);
        const query = body.query ?? undefined;
        if (query !== undefined && !store.semanticSearch) refuseQuery();
        const value = await authorized(auth, 'store:search', {
          namespace: body.namespace_prefix ?? [],
          filter: filter ?? null,
          limit: body.limit,
          offset: body.offset,
          query: query ?? null,
        });
        const items = await store.searchItems({
          namespacePrefix: namespaceOf('store:search', value.namespace),
          filter,
          limit: body.limit,
          offset: body.offset,
          query,
          refreshTtl: body.refresh_ttl ?? undefined,
        });
        return { items: items.map((item) => ({ ...itemJson(item), score: item.score ?? null })) };
      },
    })
    .route({
      method: 'post',
      path: '/store/namespaces',
      access: ['custom_auth'],
      summary: 'List namespaces (prefix and suffix may hold * wildcards)',
      tags,
      body: NamespaceList,
      response: z.strictObject({ namespaces: z.array(z.array(z.string())) }),
      handler: async ({ body, auth }) => {
        const value = await authorized(auth, 'store:list_namespaces', {
          namespace: body.prefix ?? null,
          suffix: body.suffix ?? null,
          max_depth: body.max_depth ?? null,
          limit: body.limit,
          offset: body.offset,
        });
        const conditions: NamespaceMatch[] = [];
        if (value.namespace) conditions.push({ matchType: 'prefix', path: namespaceOf('store:list_namespaces', value.namespace) });
        if (body.suffix) conditions.push({ matchType: 'suffix', path: body.suffix });
        return { namespaces: await store.namespaces({ conditions, maxDepth: body.max_depth ?? undefined, limit: body.limit, offset: body.offset }) };
      },
    });
}
