// Loads the pinned npm packages from $SPILLWAY_NPM (the node_modules folder
// `make tools` installs them into): a script under testdata has no
// node_modules of its own.
import { createRequire } from 'node:module';
import path from 'node:path';

const root = process.env.SPILLWAY_NPM;
if (!root) {
  throw new Error('SPILLWAY_NPM is not set (make tools installs the packages and exports it)');
}

/** need loads a package's module by its specifier, as require() would from root. */
export const need = createRequire(path.join(root, 'spillway-testdata.js'));
