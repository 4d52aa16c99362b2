/**
 * OpenAPI 3.1 document built from the same zod schemas that validate requests.
 */
import { isDeepStrictEqual } from 'node:util';
import { z } from 'zod';
import type { Api, RouteSpec } from './api.js';

export interface OpenApiInfo {
  title: string;
  version: string;
  description?: string;
  /** Security schemes offered on authenticated routes (any one of them is enough). */
  securitySchemes?: Record<string, Record<string, unknown>>;
}

const validationError = {
  type: 'object',
  properties: {
    detail: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          loc: { type: 'array', items: { anyOf: [{ type: 'string' }, { type: 'integer' }] } },
          msg: { type: 'string' },
          type: { type: 'string' },
          ctx: { type: 'object', description: "Details of the issue, e.g. a filter error's character `position`" },
        },
        required: ['loc', 'msg', 'type'],
      },
    },
  },
};

const errorDetail = { type: 'object', properties: { detail: { type: 'string' } }, required: ['detail'] };

const statusText: Record<number, string> = {
  400: 'Bad request',
  401: 'Missing or invalid credentials',
  403: 'Credentials not valid for this tenant or action',
  404: 'Not found',
  409: 'Conflict',
  413: 'Body too large',
  429: 'Too many requests',
  503: 'Unavailable',
};

/** Schemas named with zod's `.meta({ id })`, shared by the document's operations. */
type Components = Record<string, unknown>;

/** `#/$defs/X` (where zod puts named schemas) → `#/components/schemas/X` (where the document keeps them). */
function componentRefs(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(componentRefs);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(
    Object.entries(value).map(([key, v]) => [
      key,
      key === '$ref' && typeof v === 'string' ? v.replace(/^#\/\$defs\//, '#/components/schemas/') : componentRefs(v),
    ]),
  );
}

/**
 * A schema as JSON Schema, its named parts moved to `components` (a `$ref` inside an operation
 * resolves against the document, not the schema). A recursive schema needs a name (`.meta({ id })`).
 */
function jsonSchema(schema: z.ZodType, io: 'input' | 'output', components: Components): Record<string, unknown> {
  const { $schema: _ignored, $defs, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as Record<string, unknown>;
  for (const [name, def] of Object.entries(($defs as Record<string, unknown> | undefined) ?? {})) {
    const named = componentRefs(def);
    if (name in components && !isDeepStrictEqual(components[name], named)) {
      throw new Error(
        `OpenAPI: two different schemas are named ${name} (a schema named with .meta({ id }) must be one, and used in one direction: request or response)`,
      );
    }
    components[name] = named;
  }
  return componentRefs(rest) as Record<string, unknown>;
}

function parameters(spec: RouteSpec, where: 'path' | 'query', schema: z.ZodType | undefined, components: Components) {
  if (!schema) return [];
  const json = jsonSchema(schema, 'input', components) as { properties?: Record<string, Record<string, unknown>>; required?: string[] };
  return Object.entries(json.properties ?? {}).map(([name, prop]) => ({
    name,
    in: where,
    required: where === 'path' || (json.required ?? []).includes(name),
    ...(typeof prop.description === 'string' ? { description: prop.description } : {}),
    schema: prop,
  }));
}

/** Any Api, whatever its context and kinds of credential. */
export function openApiDocument(apis: Api<any, any>[], info: OpenApiInfo): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  const components: Components = {};
  const securityNames = Object.keys(info.securitySchemes ?? {});
  for (const api of apis) {
    for (const spec of api.routes as RouteSpec[]) {
      const responses: Record<string, unknown> = {};
      const success = spec.status ?? (spec.response || spec.events !== undefined ? 200 : 204);
      const events = spec.events !== undefined ? { 'text/event-stream': { schema: { type: 'string' } } } : {};
      responses[String(success)] = spec.response
        ? {
            description: spec.events !== undefined ? `Success; or, as server-sent events, ${spec.events}` : 'Success',
            content: { 'application/json': { schema: jsonSchema(spec.response, 'output', components) }, ...events },
          }
        : spec.events !== undefined
          ? { description: spec.events, content: { 'text/event-stream': { schema: { type: 'string' } } } }
          : spec.produces?.length
            ? { description: 'Success', content: Object.fromEntries(spec.produces.map((type) => [type, { schema: { type: 'string' } }])) }
            : { description: 'Success' };
      for (const [status, when] of Object.entries(spec.otherStatuses ?? {})) responses[status] = { description: `Success, ${when}` };
      const authenticated = api.documentsAuth(spec);
      const errorStatuses = new Set([...(authenticated ? [401, 403] : []), ...(spec.errors ?? [])]);
      for (const status of [...errorStatuses].sort()) {
        responses[String(status)] = {
          description: statusText[status] ?? 'Error',
          content: { 'application/json': { schema: errorDetail } },
        };
      }
      if (spec.params || spec.query || spec.body) {
        responses['422'] = { description: 'Validation error', content: { 'application/json': { schema: validationError } } };
      }
      const operation: Record<string, unknown> = {
        summary: spec.summary,
        ...(spec.description ? { description: spec.description } : {}),
        ...(spec.tags ? { tags: spec.tags } : {}),
        operationId: spec.operationId ?? operationId(spec),
        parameters: [...parameters(spec, 'path', spec.params, components), ...parameters(spec, 'query', spec.query, components)],
        ...(spec.body
          ? { requestBody: { required: true, content: { 'application/json': { schema: jsonSchema(spec.body, 'input', components) } } } }
          : spec.consumes?.length
            ? {
                requestBody: {
                  required: true,
                  content: Object.fromEntries(spec.consumes.map((type) => [type, { schema: { type: 'string', format: 'binary' } }])),
                },
              }
            : {}),
        responses,
        ...(authenticated && securityNames.length ? { security: securityNames.map((n) => ({ [n]: [] })) } : {}),
      };
      paths[spec.path] = { ...(paths[spec.path] ?? {}), [spec.method]: operation };
    }
  }
  return {
    openapi: '3.1.0',
    info: { title: info.title, version: info.version, ...(info.description ? { description: info.description } : {}) },
    paths,
    components: {
      schemas: { HTTPValidationError: validationError, ...components },
      ...(info.securitySchemes ? { securitySchemes: info.securitySchemes } : {}),
    },
  };
}

function operationId(spec: RouteSpec): string {
  const words = spec.path
    .split('/')
    .filter(Boolean)
    .map((part) => part.replace(/[{}]/g, '').replace(/[^A-Za-z0-9]+(.)/g, (_m, c: string) => c.toUpperCase()));
  return [spec.method, ...words].map((w, i) => (i === 0 ? w : w.charAt(0).toUpperCase() + w.slice(1))).join('');
}
