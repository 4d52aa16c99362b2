// Jest loads global setup outside its module system, so TypeScript sources are loaded with tsx here.
import { tsImport } from 'tsx/esm/api';

const { default: setup } = await tsImport('./global-setup.ts', import.meta.url);
export default setup;
