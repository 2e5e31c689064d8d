# Kernel-shaped: a compile factory returns a launcher that calls the kernel it defines.
def compile_kernel():
    def kernel():
        pass

    def launch():
        kernel()

    return launch


compile_kernel()()
