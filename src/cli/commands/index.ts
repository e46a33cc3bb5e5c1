/** Every CLI command module, in help order. Each exports `register(program)`. */
import type { Command } from 'commander';
import { register as calibrate } from './calibrate.ts';
import { register as importCmd } from './import.ts';
import { register as fit } from './fit.ts';
import { register as registry } from './registry.ts';
import { register as onboard } from './onboard.ts';
import { register as price } from './price.ts';
import { register as sweep } from './sweep.ts';
import { register as serve } from './serve.ts';
import { register as validate } from './validate.ts';
import { register as roofline } from './roofline.ts';
import { register as trace } from './trace.ts';
import { register as windowCmd } from './window.ts';
import { register as flops } from './flops.ts';

export const COMMANDS: Array<(program: Command) => void> = [
  calibrate,
  importCmd,
  fit,
  registry,
  onboard,
  price,
  sweep,
  serve,
  validate,
  roofline,
  trace,
  windowCmd,
  flops,
];
