/**
 * OpenAPI 3.1 document built from the same zod schemas that validate requests.
 */
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

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as Record<string, unknown>;
  return rest;
}

function parameters(spec: RouteSpec, where: 'path' | 'query', schema: z.ZodType | undefined) {
  if (!schema) return [];
  const json = jsonSchema(schema, 'input') as { properties?: Record<string, Record<string, unknown>>; required?: string[] };
  return Object.entries(json.properties ?? {}).map(([name, prop]) => ({
    name,
    in: where,
    required: where === 'path' || (json.required ?? []).includes(name),
    ...(typeof prop.description === 'string' ? { description: prop.description } : {}),
    schema: prop,
  }));
}

export function openApiDocument(apis: Api<unknown>[], info: OpenApiInfo): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  const securityNames = Object.keys(info.securitySchemes ?? {});
  for (const api of apis) {
    for (const spec of api.routes as RouteSpec[]) {
      const responses: Record<string, unknown> = {};
      const success = spec.status ?? (spec.response ? 200 : 204);
      responses[String(success)] = spec.response
        ? { description: 'Success', content: { 'application/json': { schema: jsonSchema(spec.response, 'output') } } }
        : { description: 'Success' };
      const authenticated = !spec.public && api.hasAuthentication;
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
        parameters: [...parameters(spec, 'path', spec.params), ...parameters(spec, 'query', spec.query)],
        ...(spec.body
          ? { requestBody: { required: true, content: { 'application/json': { schema: jsonSchema(spec.body, 'input') } } } }
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
      schemas: { HTTPValidationError: validationError },
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
