// tracejit CPU emulator: the half type and its conversions come from tj_cuda.h (force-included)
#pragma once
