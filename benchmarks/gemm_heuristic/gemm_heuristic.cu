// gemm_heuristic: cuBLASLt's heuristic first choice (what CublasLtGemm::plan uses) against the fastest of its
// first 16 candidates, timed, for the Qwen3-8B linears at the token counts of serving steps (a 2,048-token
// prefill chunk plus up to 256 decode rows, and smaller). Answers whether timing the candidates (autotuning)
// would speed up prefill and mixed steps (docs/cuda_kernels.md, "cuBLASLt's first choice at serving sizes").
// Build (here): nvcc -O2 -gencode=arch=compute_90a,code=sm_90a -o gemm_heuristic \
//                 benchmarks/gemm_heuristic/gemm_heuristic.cu -lcublasLt
// Run (device): LD_LIBRARY_PATH=/usr/local/cuda/lib64 ./gemm_heuristic
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cstdio>
#include <vector>
#define CK(x) do{auto e=(x); if(e){printf("%s:%d err %d\n",__FILE__,__LINE__,(int)e); exit(1);}}while(0)
__global__ void fill(__nv_bfloat16* p,size_t n,unsigned seed){ for(size_t i=blockIdx.x*(size_t)blockDim.x+threadIdx.x;i<n;i+=(size_t)gridDim.x*blockDim.x){ unsigned x=(unsigned)i*2654435761u^seed; x^=x>>13; x*=0x5bd1e995; x^=x>>15; p[i]=__float2bfloat16(((x&0xffff)/65536.f-0.5f)*0.1f);} }
int main(){
  cublasLtHandle_t h; CK(cublasLtCreate(&h));
  size_t wsb=32<<20; void* ws; CK(cudaMalloc(&ws,wsb));
  struct S{const char* name; int m,k;} shapes[]={{"qkv",6144,4096},{"o_proj",4096,4096},{"gate_up",24576,4096},{"down",4096,12288}};
  int ns[]={2304,2100,1800,1024,512,256};
  void *W,*X,*O; CK(cudaMalloc(&W,(size_t)24576*12288*2)); CK(cudaMalloc(&X,(size_t)4096*12288*2)); CK(cudaMalloc(&O,(size_t)4096*24576*2));
  fill<<<1024,256>>>((__nv_bfloat16*)W,(size_t)24576*12288,1); fill<<<1024,256>>>((__nv_bfloat16*)X,(size_t)4096*12288,2); CK(cudaDeviceSynchronize());
  cudaEvent_t e0,e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  for(auto& s: shapes) for(int n: ns){
    int m=s.m,k=s.k;
    cublasLtMatmulDesc_t op; CK(cublasLtMatmulDescCreate(&op,CUBLAS_COMPUTE_32F,CUDA_R_32F));
    cublasOperation_t T=CUBLAS_OP_T,N=CUBLAS_OP_N;
    CK(cublasLtMatmulDescSetAttribute(op,CUBLASLT_MATMUL_DESC_TRANSA,&T,sizeof(T)));
    CK(cublasLtMatmulDescSetAttribute(op,CUBLASLT_MATMUL_DESC_TRANSB,&N,sizeof(N)));
    cublasLtMatrixLayout_t a,b,c;
    CK(cublasLtMatrixLayoutCreate(&a,CUDA_R_16BF,k,m,k)); CK(cublasLtMatrixLayoutCreate(&b,CUDA_R_16BF,k,n,k)); CK(cublasLtMatrixLayoutCreate(&c,CUDA_R_16BF,m,n,m));
    cublasLtMatmulPreference_t pref; CK(cublasLtMatmulPreferenceCreate(&pref));
    CK(cublasLtMatmulPreferenceSetAttribute(pref,CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,&wsb,sizeof(wsb)));
    cublasLtMatmulHeuristicResult_t res[16]; int found=0;
    CK(cublasLtMatmulAlgoGetHeuristic(h,op,a,b,c,c,pref,16,res,&found));
    float alpha=1,beta=0; double best=1e30; int bi=-1; double t0=0;
    for(int i=0;i<found;i++){
      for(int w=0;w<3;w++) cublasLtMatmul(h,op,&alpha,W,a,X,b,&beta,O,c,O,c,&res[i].algo,ws,wsb,0);
      cudaEventRecord(e0); const int R=20;
      for(int r=0;r<R;r++) cublasLtMatmul(h,op,&alpha,W,a,X,b,&beta,O,c,O,c,&res[i].algo,ws,wsb,0);
      cudaEventRecord(e1); cudaEventSynchronize(e1); float ms; cudaEventElapsedTime(&ms,e0,e1);
      if(cudaGetLastError()) { continue; }
      double us=ms*1000/R; if(i==0) t0=us; if(us<best){best=us;bi=i;}
    }
    double fl=2.0*m*n*k;
    printf("%-8s n=%5d: top1 %8.1f us %6.0f TFLOP/s | best(#%d of %d) %8.1f us %6.0f TFLOP/s | gain %.1f%%\n",s.name,n,t0,fl/t0/1e6,bi,found,best,fl/best/1e6,100*(t0-best)/t0);
    cublasLtMatmulPreferenceDestroy(pref); cublasLtMatrixLayoutDestroy(a); cublasLtMatrixLayoutDestroy(b); cublasLtMatrixLayoutDestroy(c); cublasLtMatmulDescDestroy(op);
  }
}
